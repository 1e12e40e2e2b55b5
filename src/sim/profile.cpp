#include "sim/profile.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "compress/registry.h"
#include "train/yaml_document.h"

namespace sparq::sim {
namespace {

// Reads a mapping's keys with types and ranges; every error names origin and dotted key.
class Fields {
 public:
  Fields(const YAML::Node& node, std::string origin, std::string path)
      : node_(node), origin_(std::move(origin)), path_(std::move(path)) {}

  Status check_map() const {
    if (!node_.IsMap()) return Status::error("{}: {}: expected a mapping", origin_, where());
    return Status::ok();
  }
  std::string key(const std::string& k) const { return path_.empty() ? k : path_ + "." + k; }
  std::string where() const { return path_.empty() ? "top level" : path_; }
  const std::string& origin() const { return origin_; }

  Status text(const std::string& k, std::string* out, bool required) {
    seen_.insert(k);
    const YAML::Node v = node_[k];
    if (!v) return required ? missing(k) : Status::ok();
    if (!v.IsScalar()) return Status::error("{}: {}: expected text", origin_, key(k));
    *out = v.as<std::string>();
    // A network named "" loaded, and no --network could pick it (review, 2026-12-08).
    if (required && out->empty()) return Status::error("{}: {}: empty", origin_, key(k));
    return Status::ok();
  }
  Status number(const std::string& k, double* out, bool required, bool positive) {
    seen_.insert(k);
    const YAML::Node v = node_[k];
    if (!v) return required ? missing(k) : Status::ok();
    double x = 0;
    if (!v.IsScalar() || !YAML::convert<double>::decode(v, x) || !std::isfinite(x)) {
      return Status::error("{}: {}: expected a number", origin_, key(k));
    }
    if (positive ? !(x > 0) : !(x >= 0)) {
      return Status::error("{}: {}: must be {}, got {}", origin_, key(k),
                           positive ? "positive" : "non-negative", x);
    }
    *out = x;
    return Status::ok();
  }
  Status integer(const std::string& k, std::int64_t* out, bool required) {
    double x = 0;
    SPARQ_RETURN_IF_ERROR(number(k, &x, required, false));
    if (x != std::floor(x)) return Status::error("{}: {}: expected an integer", origin_, key(k));
    if (x > 0x1p40) {  // a cast of 1e19 to int64 is undefined
      return Status::error("{}: {}: {} is too large (at most 2^40)", origin_, key(k), x);
    }
    if (node_[k]) *out = static_cast<std::int64_t>(x);
    return Status::ok();
  }
  YAML::Node child(const std::string& k) {
    seen_.insert(k);
    return node_[k];
  }
  // Unknown keys are errors, so a typo never silently falls back to a default.
  Status finish() const {
    for (const auto& kv : node_) {
      const std::string k = kv.first.Scalar();
      if (!seen_.count(k)) return Status::error("{}: {}: unknown key", origin_, key(k));
    }
    return Status::ok();
  }

 private:
  Status missing(const std::string& k) const {
    return Status::error("{}: {}: missing", origin_, key(k));
  }
  YAML::Node node_;
  std::string origin_, path_;
  std::set<std::string> seen_;
};

Result<MeasuredCompute> read_measured(const YAML::Node& node, const std::string& origin) {
  Fields f(node, origin, "compute.measured");
  SPARQ_RETURN_IF_ERROR(f.check_map());
  MeasuredCompute m;
  SPARQ_RETURN_IF_ERROR(f.text("model", &m.model, true));
  SPARQ_RETURN_IF_ERROR(f.integer("micro_batch", &m.micro_batch, true));
  SPARQ_RETURN_IF_ERROR(f.integer("seq_len", &m.seq_len, true));
  SPARQ_RETURN_IF_ERROR(f.number("forward_ms", &m.forward_ms, true, true));
  SPARQ_RETURN_IF_ERROR(f.number("optimizer_ns_per_param", &m.optimizer_ns_per_param, true, false));
  if (m.micro_batch < 1) {
    return Status::error("{}: compute.measured.micro_batch: must be at least 1", origin);
  }
  const YAML::Node layers = f.child("layers");
  if (!layers || !layers.IsSequence() || layers.size() == 0) {
    return Status::error("{}: compute.measured.layers: expected a non-empty list", origin);
  }
  for (std::size_t i = 0; i < layers.size(); ++i) {
    Fields l(layers[i], origin, fmt::format("compute.measured.layers[{}]", i));
    SPARQ_RETURN_IF_ERROR(l.check_map());
    LayerTime t;
    SPARQ_RETURN_IF_ERROR(l.text("name", &t.name, true));
    SPARQ_RETURN_IF_ERROR(l.number("backward_ms", &t.backward_ms, true, false));
    SPARQ_RETURN_IF_ERROR(l.finish());
    m.layers.push_back(std::move(t));
  }
  SPARQ_RETURN_IF_ERROR(f.finish());
  return m;
}

Result<FlopCompute> read_flops(const YAML::Node& node, const std::string& origin) {
  Fields f(node, origin, "compute.flops");
  SPARQ_RETURN_IF_ERROR(f.check_map());
  FlopCompute c;
  SPARQ_RETURN_IF_ERROR(f.number("matmul_tflops", &c.matmul_tflops, true, true));
  SPARQ_RETURN_IF_ERROR(f.number("memory_gbps", &c.memory_gbps, true, true));
  SPARQ_RETURN_IF_ERROR(f.number("optimizer_ns_per_param", &c.optimizer_ns_per_param, true, false));
  SPARQ_RETURN_IF_ERROR(f.finish());
  return c;
}

}  // namespace

Result<NetworkLink> MachineProfile::network(const std::string& wanted) const {
  std::string known;
  for (const NetworkLink& n : networks) {
    if (n.name == wanted) return n;
    known += (known.empty() ? "" : ", ") + n.name;
  }
  return Status::error("profile {}: no network '{}' (it has: {})", name, wanted,
                       known.empty() ? std::string("none") : known);
}

Result<MachineProfile> parse_profile(const std::string& yaml_text, const std::string& origin) {
  // yaml-cpp reads the first document and drops the rest unchecked (train/yaml_document.h).
  if (const int line = train::second_document_line(yaml_text); line > 0) {
    return Status::error(
        "{}: holds more than one YAML document (the second one's content begins at line {}); "
        "a machine profile is one document",
        origin, line);
  }
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::error("{}: not valid YAML: {}", origin, e.what());
  }
  // Every key text and given once, checked over the whole tree before any is read, so the
  // readers below may take kv.first.Scalar() (train::check_keys; a '.' is only an unknown key).
  SPARQ_RETURN_IF_ERROR(train::check_keys(root, "", origin, train::DottedKeys::unknown_only));
  Fields top(root, origin, "");
  SPARQ_RETURN_IF_ERROR(top.check_map());
  MachineProfile p;
  SPARQ_RETURN_IF_ERROR(top.text("name", &p.name, true));
  SPARQ_RETURN_IF_ERROR(top.text("source", &p.source, true));

  const YAML::Node compute = top.child("compute");
  if (!compute) return Status::error("{}: compute: missing", origin);
  Fields c(compute, origin, "compute");
  SPARQ_RETURN_IF_ERROR(c.check_map());
  if (const YAML::Node m = c.child("measured")) {
    SPARQ_ASSIGN_OR_RETURN(p.measured, read_measured(m, origin));
  }
  if (const YAML::Node fl = c.child("flops")) {
    SPARQ_ASSIGN_OR_RETURN(p.flops, read_flops(fl, origin));
  }
  SPARQ_RETURN_IF_ERROR(c.finish());
  if (!p.measured && !p.flops) {
    return Status::error("{}: compute: needs measured or flops (or both)", origin);
  }

  if (const YAML::Node codecs = top.child("codecs")) {
    if (!codecs.IsMap()) return Status::error("{}: codecs: expected a mapping", origin);
    for (const auto& kv : codecs) {
      const std::string name = kv.first.Scalar();
      // A misspelt compressor ("lbz") loaded, and the run failed later with "codecs.lbs:
      // missing" (review, 2026-12-08). Compressors an embedder registers count too.
      if (auto known = compress::find_compressor(name); !known.is_ok()) {
        return Status::error("{}: codecs.{}: {}", origin, name, known.status().message());
      }
      Fields r(kv.second, origin, "codecs." + name);
      SPARQ_RETURN_IF_ERROR(r.check_map());
      CodecRate rate;
      SPARQ_RETURN_IF_ERROR(r.number("encode_gbps", &rate.encode_gbps, true, true));
      SPARQ_RETURN_IF_ERROR(r.number("decode_gbps", &rate.decode_gbps, true, true));
      SPARQ_RETURN_IF_ERROR(r.finish());
      p.codecs[name] = rate;
    }
  }

  const YAML::Node networks = top.child("networks");
  if (!networks || !networks.IsSequence() || networks.size() == 0) {
    return Status::error("{}: networks: expected a non-empty list", origin);
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < networks.size(); ++i) {
    Fields n(networks[i], origin, fmt::format("networks[{}]", i));
    SPARQ_RETURN_IF_ERROR(n.check_map());
    NetworkLink link;
    SPARQ_RETURN_IF_ERROR(n.text("name", &link.name, true));
    SPARQ_RETURN_IF_ERROR(n.number("alpha_us", &link.alpha_us, true, false));
    SPARQ_RETURN_IF_ERROR(n.number("gbps", &link.gbps, true, true));
    SPARQ_RETURN_IF_ERROR(n.text("source", &link.source, false));
    SPARQ_RETURN_IF_ERROR(n.finish());
    if (!names.insert(link.name).second) {
      return Status::error("{}: networks[{}].name: '{}' appears twice", origin, i, link.name);
    }
    p.networks.push_back(std::move(link));
  }
  SPARQ_RETURN_IF_ERROR(top.finish());
  return p;
}

Result<MachineProfile> load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::error("{}: cannot open the machine profile", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_profile(text.str(), path);
}

std::string profile_yaml(const MachineProfile& p, int significant_digits) {
  YAML::Emitter y;
  if (significant_digits > 0) y.SetDoublePrecision(static_cast<std::size_t>(significant_digits));
  y << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value << p.name;
  y << YAML::Key << "source" << YAML::Value << YAML::DoubleQuoted << p.source;
  y << YAML::Key << "compute" << YAML::Value << YAML::BeginMap;
  if (p.measured) {
    const MeasuredCompute& m = *p.measured;
    y << YAML::Key << "measured" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "model" << YAML::Value << YAML::DoubleQuoted << m.model;
    y << YAML::Key << "micro_batch" << YAML::Value << m.micro_batch;
    y << YAML::Key << "seq_len" << YAML::Value << m.seq_len;
    y << YAML::Key << "forward_ms" << YAML::Value << m.forward_ms;
    y << YAML::Key << "optimizer_ns_per_param" << YAML::Value << m.optimizer_ns_per_param;
    y << YAML::Key << "layers" << YAML::Value << YAML::BeginSeq;
    for (const LayerTime& t : m.layers) {
      y << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << t.name
        << YAML::Key << "backward_ms" << YAML::Value << t.backward_ms << YAML::EndMap;
    }
    y << YAML::EndSeq << YAML::EndMap;
  }
  if (p.flops) {
    y << YAML::Key << "flops" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "matmul_tflops" << YAML::Value << p.flops->matmul_tflops;
    y << YAML::Key << "memory_gbps" << YAML::Value << p.flops->memory_gbps;
    y << YAML::Key << "optimizer_ns_per_param" << YAML::Value << p.flops->optimizer_ns_per_param;
    y << YAML::EndMap;
  }
  y << YAML::EndMap;
  y << YAML::Key << "codecs" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, rate] : p.codecs) {
    y << YAML::Key << name << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
      << "encode_gbps" << YAML::Value << rate.encode_gbps << YAML::Key << "decode_gbps"
      << YAML::Value << rate.decode_gbps << YAML::EndMap;
  }
  y << YAML::EndMap;
  y << YAML::Key << "networks" << YAML::Value << YAML::BeginSeq;
  for (const NetworkLink& n : p.networks) {
    y << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << n.name
      << YAML::Key << "alpha_us" << YAML::Value << n.alpha_us << YAML::Key << "gbps"
      << YAML::Value << n.gbps;
    if (!n.source.empty()) y << YAML::Key << "source" << YAML::Value << YAML::DoubleQuoted << n.source;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

}  // namespace sparq::sim
