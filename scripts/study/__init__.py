"""scripts/study.py's pieces: the study file, runs on disk, their numbers, the reports."""
