#include "kernels/workload/chain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/config/json_document.h"
#include "sim/io/file_kind.h"
#include "sim/io/output_name.h"
#include "sim/isa/names.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::workload {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& path, const std::string& msg) {
  throw InputError(path.empty() ? fmt::format("{}: {}", file, msg)
                                : fmt::format("{}: {}: {}", file, path, msg));
}

enum class Conv { None, RowData, RowScales, ColData, ColScales };

Conv parse_conv(const std::string& c) {
  static const std::map<std::string, Conv> m = {{"", Conv::None},
                                                {"te_rowwise_data_to_x4", Conv::RowData},
                                                {"te_rowwise_scales_to_x4", Conv::RowScales},
                                                {"te_columnwise_data_to_x4", Conv::ColData},
                                                {"te_columnwise_scales_to_x4", Conv::ColScales}};
  const auto it = m.find(c);
  if (it == m.end())
    throw InputError(fmt::format("unknown conversion '{}' (known: {})", text_excerpt(c),
                                 fmt::join(chain_conversions(), ", ")));
  return it->second;
}

// TransformerEngine's name of the MXFP8 tensor component a conversion reads (an output's name ends with it).
std::string te_component(Conv c) {
  switch (c) {
    case Conv::RowData:
      return "rowwise_data";
    case Conv::RowScales:
      return "rowwise_scale_inv";
    case Conv::ColData:
      return "columnwise_data";
    case Conv::ColScales:
      return "columnwise_scale_inv";
    case Conv::None:
      break;
  }
  return "";
}

bool names_component(const std::string& output, const std::string& component) {
  if (output == component) return true;
  return output.size() > component.size() &&
         output.compare(output.size() - component.size(), component.size(), component) == 0 &&
         output[output.size() - component.size() - 1] == '_';
}

isa::DType fp8_of_x4(isa::DType d) {
  if (d == isa::DType::FP8_E4M3FN_X4) return isa::DType::FP8_E4M3FN;
  if (d == isa::DType::FP8_E5M2_X4) return isa::DType::FP8_E5M2;
  throw InputError(
      fmt::format("it makes x4 FP8 data (float8_e4m3fn_x4 or float8_e5m2_x4), and the kernel "
                  "reads {}",
                  isa::dtype_name(d)));
}

// Logical [M, N] of the TE tensors behind a consumer's tensor `t` (2-D).
struct Dims {
  int64_t M, N;
};
Dims te_dims(Conv c, const TensorInfo& t) {
  if (t.shape.size() != 2) throw InputError("it makes 2-D tensors, and the kernel reads " + t.describe());
  const int64_t r = t.shape[0], f = t.shape[1];
  if (c == Conv::RowData || c == Conv::RowScales) return {f, 4 * r};  // [N/4, M]
  return {4 * r, f};                                                  // [M/4, N]
}

}  // namespace

const std::vector<std::string>& chain_conversions() {
  static const std::vector<std::string> v = {"te_rowwise_data_to_x4", "te_rowwise_scales_to_x4",
                                             "te_columnwise_data_to_x4", "te_columnwise_scales_to_x4"};
  return v;
}

TensorInfo conversion_source(const std::string& convert, const TensorInfo& target) {
  const Conv c = parse_conv(convert);
  if (c == Conv::None) return target;
  const Dims d = te_dims(c, target);
  if (d.M % 32 != 0 || d.N % 32 != 0)
    throw InputError(fmt::format("the MXFP8 tensors' M = {} and N = {} must be multiples of 32", d.M, d.N));
  TensorInfo s{target.name, isa::DType::E8M0, {}};
  switch (c) {
    case Conv::RowData:
    case Conv::ColData:
      s.dtype = fp8_of_x4(target.dtype);
      s.shape = {d.M, d.N};
      break;
    case Conv::RowScales:
    case Conv::ColScales: {
      if (target.dtype != isa::DType::E8M0)
        throw InputError("it makes E8M0 scales, and the kernel reads " + target.describe());
      const num::ScaleShape te =
          num::te_scale_shape(d.M, d.N, c == Conv::RowScales ? num::MxAxis::Row : num::MxAxis::Col);
      s.shape = {te.rows, te.cols};
      break;
    }
    case Conv::None:
      break;
  }
  return s;
}

tensor::HostTensor convert_tensor(const std::string& convert, const tensor::HostTensor& in,
                                  const TensorInfo& target) {
  const Conv c = parse_conv(convert);
  if (c == Conv::None) return in;
  const Dims d = te_dims(c, target);
  const int64_t M = d.M, N = d.N;
  tensor::HostTensor out = tensor::HostTensor::zeros(target.dtype, target.shape);
  const uint8_t* src = in.bytes.data();
  uint8_t* dst = out.bytes.data();
  switch (c) {
    case Conv::RowData:  // logical operand [K = N, F = M] = data^T; 1x32: x4 (q, m) byte j = data[m, 4q + j]
      for (int64_t m = 0; m < M; ++m)
        for (int64_t q = 0; q < N / 4; ++q) std::memcpy(dst + (q * M + m) * 4, src + m * N + 4 * q, 4);
      break;
    case Conv::ColData:  // logical operand [K = M, F = N] = data
      num::swizzle(src, M, N, num::QuantScheme::OneX32, dst);
      break;
    case Conv::RowScales: {  // compact [M, N/32] -> group rows of the operand [N/32, M]
      std::vector<uint8_t> rows(static_cast<size_t>(M * (N / 32))), groups(rows.size());
      num::from_te_compact(src, M, N, num::MxAxis::Row, rows.data());
      for (int64_t m = 0; m < M; ++m)
        for (int64_t g = 0; g < N / 32; ++g) groups[g * M + m] = rows[m * (N / 32) + g];
      std::fill(out.bytes.begin(), out.bytes.end(), uint8_t{0x7F});
      num::scales_to_trainium(groups.data(), N, M, false, 0, dst);
      break;
    }
    case Conv::ColScales: {  // compact [M/32, N] = group rows of the operand [M, N]
      std::vector<uint8_t> groups(static_cast<size_t>(M / 32 * N));
      num::from_te_compact(src, M, N, num::MxAxis::Col, groups.data());
      std::fill(out.bytes.begin(), out.bytes.end(), uint8_t{0x7F});
      num::scales_to_trainium(groups.data(), M, N, false, 0, dst);
      break;
    }
    case Conv::None:
      break;
  }
  return out;
}

bool is_pipeline_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, expected a JSON file");
  const json doc = config::read_json_document(path);
  return doc.is_object() && doc.contains("stages") && !doc.contains("kernel");
}

bool has_chained_inputs(const std::string& path, const std::vector<std::string>& sets) {
  const json doc = workload_document(path, sets);
  if (!doc.is_object() || !doc.contains("inputs") || !doc["inputs"].is_object()) return false;
  for (const auto& [k, v] : doc["inputs"].items())
    if (v.is_object() && v.contains("from")) return true;
  return false;
}

void Chain::keep_outputs(size_t i) {
  for (size_t j = i + 1; j < stages.size(); ++j)
    for (const ChainLink& l : stages[j].links)
      if (l.producer == i && !kept_.count({i, l.output}))
        kept_.emplace(std::make_pair(i, l.output), stages[i].run->outputs().at(l.output));
}

void Chain::give_inputs(size_t j) {
  ChainStage& s = stages[j];
  for (const ChainLink& l : s.links) {
    const TensorInfo& t = *s.run->prepared().input(l.input);
    s.run->set_input(l.input, convert_tensor(l.convert, kept_.at({l.producer, l.output}), t));
  }
  // Released once no later stage reads them.
  for (auto it = kept_.begin(); it != kept_.end();) {
    bool later = false;
    for (size_t k = j + 1; k < stages.size() && !later; ++k)
      for (const ChainLink& l : stages[k].links)
        later |= l.producer == it->first.first && l.output == it->first.second;
    it = later ? std::next(it) : kept_.erase(it);
  }
}

std::vector<kernels::ChainStageData> Chain::stage_data(bool with_tensors) const {
  std::vector<kernels::ChainStageData> v;
  for (const ChainStage& s : stages) {
    WorkloadRun& r = *s.run;
    v.push_back({s.name(), r.prepared().w.kernel, r.prepared().kernel->params(),
                 with_tensors ? &r.inputs() : nullptr, with_tensors ? &r.outputs() : nullptr});
  }
  return v;
}

std::string Chain::reference_not_run() const {
  if (reference.empty()) return "";
  for (const ChainStage& s : stages)
    if (!s.run->numerics())
      return fmt::format("stage '{}' ran without numerics (no outputs to check)", s.name());
  return "";
}

std::vector<tensor::CheckResult> Chain::run_reference() const {
  if (reference.empty() || !reference_not_run().empty()) return {};
  try {
    return kernels::find_chain_reference(reference)->run(stage_data(true));
  } catch (const InputError& e) {
    fail(file, "reference", e.what());
  }
}

namespace {

struct Loader {
  std::vector<std::string> sets;  // of the root workload
  std::string root;               // canonical path of the root workload ("" for a pipeline)
  std::map<std::string, std::vector<std::string>> stage_sets;  // pipeline: by stage name
  bool no_numerics = false;
  std::map<std::string, size_t> index;  // canonical path -> stage
  std::vector<std::string> visiting;    // canonical paths on the DFS stack
  std::vector<std::string> visiting_files;
  std::vector<Workload> order;  // parsed workloads in run order
  std::vector<std::string> files;

  static std::string canon(const std::string& p) {
    std::error_code ec;
    const fs::path c = fs::weakly_canonical(p, ec);
    return ec ? fs::absolute(p).lexically_normal().string() : c.string();
  }

  // Visits workload `file` (read as `shown`), named by `by` (consumer file and key) when not a root.
  size_t visit(const std::string& file, const std::string& by_file, const std::string& by_path) {
    const std::string key = canon(file);
    const auto cyc = std::find(visiting.begin(), visiting.end(), key);
    if (cyc != visiting.end()) {
      std::vector<std::string> loop(visiting_files.begin() + (cyc - visiting.begin()), visiting_files.end());
      loop.push_back(file);
      fail(by_file, by_path,
           fmt::format("{} reads this workload's outputs: a cycle ({}); a chain runs each workload once, "
                       "after every workload it reads",
                       file, fmt::join(loop, " -> ")));
    }
    if (const auto it = index.find(key); it != index.end()) return it->second;
    std::error_code ec;
    if (!by_file.empty()) {
      const auto st = fs::status(file, ec);
      if (!fs::exists(st)) fail(by_file, by_path, fmt::format("{}: {}", file, io::missing_reason(file)));
      if (!fs::is_regular_file(st)) fail(by_file, by_path, fmt::format("{}: not a regular file", file));
      const json doc = config::read_json_document(file);
      if (!doc.is_object() || !doc.contains("kernel"))
        fail(by_file, by_path, fmt::format("{} is not a workload (no \"kernel\" key)", file));
    }
    std::vector<std::string> s;
    if (key == root) s = sets;
    Workload w = parse_workload(file, s);
    if (const auto it = stage_sets.find(w.name); it != stage_sets.end()) w = parse_workload(file, it->second);
    if (no_numerics) w.numerics = false;
    // The stage's output folder is OUT/<name>: not a file trnsim writes there (a hidden name, one of
    // trnsim's records, journals and temporaries, is refused by parse_workload: io::folder_name_problem).
    if (w.name == "chain_stats.json" || w.name == "stats.json" || w.name == "host.json")
      fail(file, "name",
           fmt::format("'{}' cannot name a chain's stage: its output folder OUT/{} would clash with the file "
                       "of that name trnsim writes there; rename the workload",
                       text_excerpt(w.name), text_excerpt(w.name)));
    visiting.push_back(key);
    visiting_files.push_back(file);
    for (const InputEntry& e : w.inputs)
      if (e.from) visit(e.from->file, file, "inputs." + e.key + ".from");
    visiting.pop_back();
    visiting_files.pop_back();
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i].name == w.name)
        fail(file, "name",
             fmt::format("'{}' is also the name of {}: the stages of a chain need distinct names (their "
                         "output folders)",
                         w.name, files[i]));
    index[key] = order.size();
    order.push_back(std::move(w));
    files.push_back(file);
    return order.size() - 1;
  }
};

// Checks every link of stage `ci` (prepared) and records it.
void link_stage(Chain& chain, size_t ci, const std::map<std::string, size_t>& index) {
  ChainStage& cs = chain.stages[ci];
  const PreparedWorkload& cp = cs.run->prepared();
  for (const InputEntry& e : cp.w.inputs) {
    if (!e.from) continue;
    const std::string path = "inputs." + e.key;
    const size_t pi = index.at(Loader::canon(e.from->file));
    const ChainStage& ps = chain.stages[pi];
    const PreparedWorkload& pp = ps.run->prepared();
    const TensorInfo* made = pp.output(e.from->output);
    if (made == nullptr) {
      std::vector<std::string> outs;
      for (const TensorInfo& t : pp.outputs) outs.push_back(t.name);
      fail(cp.w.file, path + ".output",
           fmt::format("workload '{}' ({}) makes no output '{}' with its parameters (its outputs: {})",
                       pp.w.name, ps.file, text_excerpt(e.from->output), fmt::join(outs, ", ")));
    }
    const TensorInfo& target = *cp.input(e.key);
    TensorInfo source;
    try {
      source = conversion_source(e.from->convert, target);
    } catch (const InputError& err) {
      fail(cp.w.file, path + ".convert", err.what());
    }
    if (!e.from->convert.empty()) {
      const json kp = cs.run->prepared().kernel->params(), pk = pp.kernel->params();
      if (!kp.contains("quant_scheme") || kp["quant_scheme"] != "1x32")
        fail(cp.w.file, path + ".convert",
             fmt::format("'{}' writes the x4 layout of quant_scheme 1x32 (OCP's 32-value groups, as TE's "
                         "blocks), and kernel '{}' runs quant_scheme {}: set params.quant_scheme to \"1x32\"",
                         e.from->convert, cp.w.kernel,
                         kp.contains("quant_scheme") ? json_excerpt(kp["quant_scheme"]) : "(none)"));
      // Rowwise and columnwise tensors of a square block have one dtype and shape: only their names tell
      // them apart (TransformerEngine's component names, which the producer's outputs carry).
      const std::string component = te_component(parse_conv(e.from->convert));
      if (!names_component(e.from->output, component))
        fail(cp.w.file, path + ".convert",
             fmt::format(
                 "'{}' reads TransformerEngine's {} (an output named *_{}), and output '{}' of workload "
                 "'{}' ({}) is not that component: read the output named *_{} or use the conversion "
                 "of this one",
                 e.from->convert, component, component, text_excerpt(e.from->output), pp.w.name, ps.file,
                 component));
      if (pk.contains("scale_layout") && pk["scale_layout"] != "compact")
        fail(cp.w.file, path + ".convert",
             fmt::format("'{}' reads TransformerEngine's compact scale layout, and workload '{}' ({}) writes "
                         "scale_layout {}",
                         e.from->convert, pp.w.name, ps.file, json_excerpt(pk["scale_layout"])));
    }
    if (made->dtype != source.dtype || made->shape != source.shape)
      fail(cp.w.file, path,
           fmt::format("workload '{}' ({}) output {} does not fit: kernel '{}' reads input {}{}", pp.w.name,
                       ps.file, TensorInfo{made->name, made->dtype, made->shape}.describe(), cp.w.kernel,
                       target.describe(),
                       e.from->convert.empty()
                           ? ""
                           : fmt::format(", which '{}' makes from {} {}", e.from->convert,
                                         isa::dtype_name(source.dtype), tensor::shape_str(source.shape))));
    if (cp.w.numerics && !pp.w.numerics)
      fail(cp.w.file, path + ".from",
           fmt::format("workload '{}' ({}) runs without numerics, so it computes no '{}' for this one "
                       "(set \"numerics\": false here too, or run both with numerics)",
                       pp.w.name, ps.file, e.from->output));
    cs.links.push_back({e.key, pi, e.from->output, e.from->convert});
  }
}

// A pipeline's "name" (document `doc` of the file `path`), checked as a folder name.
std::string pipeline_name(const std::string& path, const json& doc) {
  if (!doc.contains("name") || !doc["name"].is_string())
    fail(path, "name", "missing or not a string (the default output folder is out/<name>)");
  if (const std::string problem = io::folder_name_problem(doc["name"].get<std::string>()); !problem.empty())
    fail(path, "name", fmt::format("{} {}", json_excerpt(doc["name"]), problem));
  return doc["name"].get<std::string>();
}

}  // namespace

std::string chain_name(const std::string& path, const std::vector<std::string>& sets) {
  if (is_pipeline_file(path)) return pipeline_name(path, config::read_json_document(path));
  return parse_workload(path, sets).name;
}

Chain load_chain(const std::string& path, const std::vector<std::string>& sets, bool no_numerics) {
  Chain chain;
  chain.file = path;
  Loader ld;
  ld.no_numerics = no_numerics;
  std::vector<std::pair<std::string, std::string>> roots;  // file, JSON path naming it
  if (is_pipeline_file(path)) {
    chain.pipeline = true;
    const json doc = config::read_json_document(path);
    for (const auto& [k, v] : doc.items())
      if (k != "name" && k != "description" && k != "stages" && k != "reference")
        fail(path, k, "unknown key (expected name, description, stages, reference)");
    chain.name = pipeline_name(path, doc);
    if (doc.contains("description")) {
      if (!doc["description"].is_string()) fail(path, "description", "expected a string");
      chain.description = doc["description"].get<std::string>();
    }
    if (doc.contains("reference")) {
      if (!doc["reference"].is_string()) fail(path, "reference", "expected a chain reference's name");
      chain.reference = doc["reference"].get<std::string>();
    }
    const json& st = doc["stages"];
    if (!st.is_array() || st.empty())
      fail(path, "stages", "expected a list of workload files, found " + json_excerpt(st));
    const std::string dir = fs::path(path).parent_path().string();
    for (size_t i = 0; i < st.size(); ++i) {
      if (!st[i].is_string() || st[i].get<std::string>().empty())
        fail(path, fmt::format("stages[{}]", i), "expected a workload file, found " + json_excerpt(st[i]));
      const std::string f = st[i].get<std::string>();
      roots.emplace_back(fs::path(f).is_absolute() || dir.empty() ? f : (fs::path(dir) / f).string(),
                         fmt::format("stages[{}]", i));
      for (size_t j = 0; j + 1 < roots.size(); ++j)
        if (Loader::canon(roots[j].first) == Loader::canon(roots.back().first))
          fail(path, roots.back().second,
               fmt::format("{} is listed twice (also {}): a chain runs each workload once", f,
                           roots[j].second));
    }
    // --set STAGE.PATH=VALUE: the stage by its name (read from each file's "name").
    std::map<std::string, std::string> names;  // stage name -> file (roots and what they read come later)
    for (const auto& [f, at] : roots) {
      switch (io::file_kind(f)) {
        case io::FileKind::kMissing:
          fail(path, at, fmt::format("{}: {}", f, io::missing_reason(f)));
        case io::FileKind::kDirectory:
          fail(path, at, fmt::format("{}: is a directory, expected a workload", f));
        case io::FileKind::kSpecial:
          fail(path, at, fmt::format("{}: {}", f, io::kNotARegularFile));
        case io::FileKind::kRegular:
          break;
      }
      const json w = config::read_json_document(f);
      if (!w.is_object() || !w.contains("kernel") || !w.contains("name") || !w["name"].is_string())
        fail(path, at, fmt::format("{} is not a workload (a \"kernel\" and a \"name\")", f));
      names[w["name"].get<std::string>()] = f;
    }
    for (const std::string& s : sets) {
      // The longest stage name followed by a '.' (a stage's name may hold dots).
      std::string stage;
      for (const auto& [n, f] : names)
        if (s.size() > n.size() + 1 && s.compare(0, n.size(), n) == 0 && s[n.size()] == '.' &&
            n.size() > stage.size())
          stage = n;
      const size_t dot = stage.size();
      if (stage.empty()) {
        std::vector<std::string> known;
        for (const auto& [n, f] : names) known.push_back(n);
        throw InputError(
            fmt::format("--set {}: a pipeline's assignments are STAGE.PATH=VALUE with STAGE one "
                        "of its stages' names ({})",
                        text_excerpt(s), fmt::join(known, ", ")));
      }
      ld.stage_sets[stage].push_back(s.substr(dot + 1));
    }
  } else {
    roots.emplace_back(path, "");
    ld.root = Loader::canon(path);
    ld.sets = sets;
  }
  for (const auto& [f, at] : roots) ld.visit(f, at.empty() ? "" : path, at);
  if (!chain.pipeline) chain.name = ld.order.back().name;
  for (size_t i = 0; i < ld.order.size(); ++i) {
    ChainStage s;
    s.file = ld.files[i];
    s.run = std::make_unique<WorkloadRun>(std::move(ld.order[i]));
    chain.stages.push_back(std::move(s));
  }
  for (size_t i = 0; i < chain.stages.size(); ++i) link_stage(chain, i, ld.index);
  if (!chain.reference.empty()) {
    const kernels::ChainReference* ref = kernels::find_chain_reference(chain.reference);
    if (ref == nullptr) {
      std::vector<std::string> known;
      for (const kernels::ChainReference& r : kernels::chain_references()) known.push_back(r.name);
      fail(path, "reference",
           fmt::format("unknown chain reference '{}' (known: {})", text_excerpt(chain.reference),
                       fmt::join(known, ", ")));
    }
    try {
      ref->check(chain.stage_data(false));
    } catch (const InputError& e) {
      fail(path, "reference", e.what());
    }
  }
  return chain;
}

}  // namespace trnsim::workload
