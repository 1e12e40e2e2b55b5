# sim_profile: measures a machine profile for the step simulator (src/sim/measure.h).
sparq_executable(sim_profile SOURCES sim_profile.cpp DEPS sparq_sim CLI11::CLI11)
