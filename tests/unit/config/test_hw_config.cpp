// Hardware config loading, overrides and validation errors (file + JSON path in every message).
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/config/hw_config.h"
#include "sim/config/hw_names.h"

using trnsim::InputError;
using namespace trnsim::config;
using nlohmann::json;

namespace {

const std::string kTrn2 = std::string(TRNSIM_SOURCE_DIR) + "/configs/hw/trn2.json";
const std::string kTrn3 = std::string(TRNSIM_SOURCE_DIR) + "/configs/hw/trn3.json";

json load_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// The message of the InputError that `f` throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("trn2 and trn3 load with the documented values", "[config]") {
  HwConfig t2 = load_hw_config(kTrn2);
  CHECK(t2.name == "trn2");
  CHECK(t2.generation == trnsim::isa::Generation::Trn2);
  CHECK(t2.pe.clock_GHz == 2.4);
  CHECK(t2.dve.clock_GHz == 0.96);
  CHECK(t2.pe.mm_init_latency_cycles == 64);
  CHECK(t2.dma.engine_bandwidth_GBps == 23);
  CHECK(t2.hbm.bandwidth_GBps == 725);
  CHECK(t2.memory.sbuf_bytes_per_partition == 224 * 1024);
  CHECK_FALSE(t2.features.nc_matmul_mx);
  // Fixed DMA cost composition (configs/hw/trn2.json dma.setup_ns, the split is [U]): 50 trigger + 1000 setup
  // + 240 HBM latency + 10 semaphore write = 1300 ns (reference §2.7).
  CHECK(t2.dma.trigger_ns + t2.dma.setup_ns + t2.hbm.latency_ns + t2.sync.semaphore_latency_ns == 1300);
  CHECK(t2.limits().hbm_bytes == uint64_t{24} << 30);  // one 24 GiB stack per LNC2 pair (reference §1.5)
  // sync.kernel_launch_ns is [fitted] (tools/fidelity, configs/fidelity/measured.json): a positive delay.
  CHECK(t2.sync.kernel_launch_ns > 0);

  HwConfig t3 = load_hw_config(kTrn3);
  CHECK(t3.generation == trnsim::isa::Generation::Trn3);
  CHECK(t3.dve.clock_GHz == 1.2);
  CHECK(t3.dma.engine_bandwidth_GBps == 33);
  CHECK(t3.hbm.bandwidth_GBps == 1200);
  CHECK(t3.memory.sbuf_bytes_per_partition == 256 * 1024);
  CHECK(t3.features.nc_matmul_mx);
  CHECK(t3.act.perf_mode_bf16 == 2);

  // Trn1 (NeuronCore-v2): the v2 guide's clocks and sizes, no DGE-era or MX features (configs/hw/trn1.json).
  HwConfig t1 = load_hw_config("trn1");
  CHECK(t1.generation == trnsim::isa::Generation::Trn1);
  CHECK(t1.pe.clock_GHz == 2.8);
  CHECK(t1.dve.clock_GHz == 1.12);
  CHECK(t1.act.clock_GHz == 1.4);
  CHECK(t1.memory.sbuf_bytes_per_partition == 192 * 1024);
  CHECK(t1.dma.engine_bandwidth_GBps == 17);
  CHECK(t1.hbm.bandwidth_GBps == 880);  // 820 GiB/s per chip in GB/s
  CHECK(t1.limits().hbm_bytes == uint64_t{32} << 30);
  CHECK_FALSE(t1.features.nc_matmul_mx);
  CHECK_FALSE(t1.features.quantize_mx);
  CHECK_FALSE(t1.features.double_row);
  CHECK_FALSE(t1.features.bf16_psum);
  CHECK(t1.dve.perf_mode_copy_contiguous == 1);
  CHECK_FALSE(t1.pe.throttle_enabled);
}

TEST_CASE("configs resolve by name and give ISA limits", "[config]") {
  HwConfig c = load_hw_config("trn2");
  CHECK(c.name == "trn2");
  trnsim::isa::Limits l = c.limits();
  CHECK(l.sbuf_bytes_per_partition == 229376);
  CHECK(l.psum_bank_bytes == 2048);
  CHECK(l.num_semaphores == 63);  // 64 per core, the last reserved for core_barrier
  CHECK(c.sync.barrier_semaphore() == 63);
  CHECK(l.num_dma_queues == 16);
  // Every shipped config is named, from the folders the lookup reads (configs/hw/*.json: trn1 too).
  CHECK(known_hw_configs() == std::vector<std::string>{"trn1", "trn2", "trn3"});
  CHECK(error_of([] { load_hw_config("trn9"); }) ==
        "unknown hardware config 'trn9' (known: trn1, trn2, trn3, or a .json path; TRNSIM_CONFIG_DIR names a "
        "folder of configs); looked in: " TRNSIM_SOURCE_DIR "/configs/hw/trn9.json");
}

TEST_CASE("DMA packet rate: efficiency min(1, b / (packet_ns x bandwidth))", "[config]") {
  HwConfig c = load_hw_config(kTrn2);
  // dma.packet_ns = 96 at 23 B/ns: packets of 96 x 23 = 2208 B and more run at full rate.
  CHECK(c.dma.packet_ns == 96);
  CHECK(c.dma_efficiency(1104) == Approx(0.5));
  CHECK(c.dma_efficiency(4) == Approx(4.0 / 2208));
  CHECK(c.dma_efficiency(2208) == Approx(1.0));
  CHECK(c.dma_efficiency(8192) == Approx(1.0));
  CHECK(c.dma_efficiency(0) > 0);  // a zero-byte transfer's per-byte cost stays finite
}

TEST_CASE("DMA efficiency curve interpolates and clamps", "[config]") {
  HwConfig c = load_hw_config(kTrn2, {{"dma.packet_ns", 0}});  // 0: the curve instead of the packet rate
  // Points (256, 0.38), (512, 0.58): halfway at 384 B -> 0.48.
  CHECK(c.dma_efficiency(384) == Approx(0.48));
  CHECK(c.dma_efficiency(4096) == Approx(1.0));
  CHECK(c.dma_efficiency(65536) == Approx(1.0));  // clamped above the last point
  CHECK(c.dma_efficiency(1) == Approx(0.06));     // clamped below the first point (32 B)
}

TEST_CASE("overrides replace a leaf value before validation", "[config]") {
  HwConfig c = load_hw_config(kTrn2, {{"dma.engine_bandwidth_GBps", 30}, {"pe.throttle.enabled", false}});
  CHECK(c.dma.engine_bandwidth_GBps == 30);
  CHECK_FALSE(c.pe.throttle_enabled);

  auto [path, value] = parse_override("hbm.bandwidth_GBps=100.5");
  CHECK(path == "hbm.bandwidth_GBps");
  CHECK(value.get<double>() == 100.5);
  CHECK(error_of([] { parse_override("novalue"); }).find("expected path=value") != std::string::npos);

  // An override is validated like the file: out of range names the JSON path.
  CHECK(error_of([] {
          load_hw_config(kTrn2, {{"pe.clock_GHz", -1}});
        }) == kTrn2 +
                  ": pe.clock_GHz.value: expected a number in [0.01, 100], found -1 (from the override "
                  "pe.clock_GHz=-1)");
}

TEST_CASE("bad override paths are errors naming the path", "[config]") {
  CHECK(
      error_of([] {
        load_hw_config(kTrn2, {{"dma.engine_bandwith_GBps", 30}});
      }) ==
      kTrn2 +
          ": override dma.engine_bandwith_GBps: no such parameter (dma.engine_bandwith_GBps does not exist)");
  CHECK(error_of([] {
          load_hw_config(kTrn2, {{"pe", 1}});
        }).find("override pe: not a parameter") != std::string::npos);
  CHECK(error_of([] {
          load_hw_config(kTrn2, {{"pe..clock_GHz", 1}});
        }).find("malformed parameter path") != std::string::npos);
}

TEST_CASE("validation errors name the file and the JSON path", "[config]") {
  // A PSUM bank of 1 byte made the kernels divide by its FP32 column count, 0 (SIGFPE).
  CHECK_THAT(error_of([] {
               load_hw_config(kTrn3, {{"memory.psum_bank_bytes", 1}});
             }),
             Catch::StartsWith(kTrn3 + ": memory.psum_bank_bytes.value: expected an integer in [4, "));
  CHECK_THAT(error_of([] {
               load_hw_config(kTrn3, {{"memory.psum_bank_bytes", 6}});
             }),
             Catch::StartsWith(kTrn3 + ": memory.psum_bank_bytes.value: expected a multiple of 4"));

  json base = load_json(kTrn2);
  const std::string f = "my.json";

  SECTION("unknown key") {
    json d = base;
    d["pe"]["clock_Ghz"] = {{"value", 2.4}, {"source", "typo"}};
    CHECK(error_of([&] { parse_hw_config(d, f); }) == "my.json: pe.clock_Ghz: unknown key");
  }
  SECTION("unknown key inside a leaf") {
    json d = base;
    d["hbm"]["latency_ns"]["unit"] = "ns";
    CHECK(error_of([&] { parse_hw_config(d, f); }) == "my.json: hbm.latency_ns.unit: unknown key");
  }
  SECTION("wrong type") {
    json d = base;
    d["dma"]["engine_bandwidth_GBps"]["value"] = "fast";
    CHECK(error_of([&] { parse_hw_config(d, f); }) ==
          "my.json: dma.engine_bandwidth_GBps.value: expected a number in [0.01, 100000], found \"fast\"");
    d = base;
    d["pe"]["ls_overlap"]["value"] = 1;
    CHECK(error_of([&] { parse_hw_config(d, f); }) ==
          "my.json: pe.ls_overlap.value: expected true or false, found 1");
  }
  SECTION("missing value") {
    json d = base;
    d["hbm"].erase("bandwidth_GBps");
    CHECK(error_of([&] { parse_hw_config(d, f); }).rfind("my.json: hbm.bandwidth_GBps: missing value", 0) ==
          0);
    d = base;
    d["hbm"]["latency_ns"].erase("value");
    CHECK(error_of([&] { parse_hw_config(d, f); }) == "my.json: hbm.latency_ns.value: missing value");
    d = base;
    d["hbm"]["latency_ns"].erase("source");
    CHECK(error_of([&] {
            parse_hw_config(d, f);
          }).rfind("my.json: hbm.latency_ns.source: missing source note", 0) == 0);
  }
  SECTION("out of range") {
    json d = base;
    d["pe"]["throttle"]["cap"]["value"] = 1.5;
    CHECK(error_of([&] { parse_hw_config(d, f); }) ==
          "my.json: pe.throttle.cap.value: expected a number in [0.01, 1], found 1.5");
    d = base;
    d["dma"]["engines_per_core"]["value"] = 2.5;
    CHECK(error_of([&] { parse_hw_config(d, f); }) ==
          "my.json: dma.engines_per_core.value: expected an integer in [1, 256], found 2.5");
    d = base;
    d["dma"]["efficiency_curve"]["value"] = json::array({json::array({256, 0.5}), json::array({128, 0.9})});
    CHECK(error_of([&] {
            parse_hw_config(d, f);
          }).rfind("my.json: dma.efficiency_curve.value[1]: expected", 0) == 0);
  }
  SECTION("bad generation") {
    json d = base;
    d["generation"] = "trn4";
    CHECK(error_of([&] { parse_hw_config(d, f); }) ==
          "my.json: generation: expected \"trn1\", \"trn2\" or \"trn3\", found \"trn4\"");
  }
}

TEST_CASE("absurd values are rejected with the file, the key and the accepted range", "[config]") {
  // The values that made a run spin forever (simulated time past 2^64 ps) before they had a lower bound.
  CHECK(error_of([] {
          load_hw_config(kTrn3, {{"hbm.bandwidth_GBps", 1e-11}});
        }) ==
        kTrn3 +
            ": hbm.bandwidth_GBps.value: expected a number in [0.01, 1e+06], found 1e-11 (from the override "
            "hbm.bandwidth_GBps=1e-11)");
  CHECK(error_of([] {
          load_hw_config(kTrn3, {{"hbm.bandwidth_GBps", 1e-300}});
        }) ==
        kTrn3 +
            ": hbm.bandwidth_GBps.value: expected a number in [0.01, 1e+06], found 1e-300 (from the override "
            "hbm.bandwidth_GBps=1e-300)");
  CHECK(error_of([] {
          load_hw_config(kTrn3, {{"dma.transpose_efficiency_hbm", 1e-300}});
        }) ==
        kTrn3 +
            ": dma.transpose_efficiency_hbm.value: expected a number in [0.01, 1], found 1e-300 (from the "
            "override dma.transpose_efficiency_hbm=1e-300)");

  json base = load_json(kTrn2);
  const std::string f = "my.json";
  auto with = [&](const std::string& path, const json& value) {
    json d = base;
    json* node = &d;
    for (size_t pos = 0, dot; pos != std::string::npos; pos = dot == std::string::npos ? dot : dot + 1) {
      dot = path.find('.', pos);
      node = &(*node)[path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos)];
    }
    (*node)["value"] = value;
    return error_of([&] { parse_hw_config(d, f); });
  };
  // Zero and near-zero rates: a clock, a bandwidth, an efficiency, the throttle cap and window.
  CHECK(with("pe.clock_GHz", 0) == "my.json: pe.clock_GHz.value: expected a number in [0.01, 100], found 0");
  CHECK(with("dve.clock_GHz", 1e-6) ==
        "my.json: dve.clock_GHz.value: expected a number in [0.01, 100], found 1e-06");
  CHECK(with("dma.engine_bandwidth_GBps", 0.001) ==
        "my.json: dma.engine_bandwidth_GBps.value: expected a number in [0.01, 100000], found 0.001");
  CHECK(with("dma.accumulate_efficiency", 0.001) ==
        "my.json: dma.accumulate_efficiency.value: expected a number in [0.01, 1], found 0.001");
  CHECK(with("pe.throttle.cap", 1e-9) ==
        "my.json: pe.throttle.cap.value: expected a number in [0.01, 1], found 1e-09");
  CHECK(with("pe.throttle.window_ns", 0) ==
        "my.json: pe.throttle.window_ns.value: expected a number in [1, 1e+06], found 0");
  CHECK(with("dma.efficiency_curve", json::array({json::array({32, 1e-300})})) ==
        "my.json: dma.efficiency_curve.value[0]: expected a non-empty array of [bytes_per_partition in (0, "
        "1073741824], efficiency in [0.01, 1]] points with increasing bytes, found [32,1e-300]");
  // Latencies up to 1 ms; counts and sizes within what the model and host memory can hold.
  CHECK(with("dma.setup_ns", 2e6) ==
        "my.json: dma.setup_ns.value: expected a number in [0, 1e+06], found 2000000.0");
  CHECK(with("sync.kernel_launch_ns", -1) ==
        "my.json: sync.kernel_launch_ns.value: expected a number in [0, 1e+06], found -1");
  CHECK(with("memory.sbuf_bytes_per_partition", 1 << 30) ==
        "my.json: memory.sbuf_bytes_per_partition.value: expected an integer in [1, 4194304], found "
        "1073741824");
  CHECK(with("dma.queues_per_core", 0) ==
        "my.json: dma.queues_per_core.value: expected an integer in [1, 256], found 0");
  CHECK(with("dma.queue_sets", 1) == "my.json: dma.queue_sets.value: expected true or false, found 1");
  CHECK(with("dma.descriptor_ns", -1) ==
        "my.json: dma.descriptor_ns.value: expected a number in [0, 1e+06], found -1");

  // Every numeric parameter has an upper bound: 1e300 is rejected wherever a number is read.
  int numeric = 0;
  for (const auto& [group, leaves] : base.items()) {
    if (!leaves.is_object()) continue;
    std::vector<std::pair<std::string, json>> stack;
    for (const auto& [k, v] : leaves.items()) stack.emplace_back(group + "." + k, v);
    while (!stack.empty()) {
      auto [path, node] = stack.back();
      stack.pop_back();
      if (!node.contains("value")) {
        for (const auto& [k, v] : node.items()) stack.emplace_back(path + "." + k, v);
        continue;
      }
      if (!node["value"].is_number()) continue;
      ++numeric;
      INFO(path);
      CHECK(with(path, 1e300).rfind(f + ": " + path + ".value: expected a", 0) == 0);
    }
  }
  CHECK(numeric == 58);  // every numeric leaf of trn2.json (the efficiency curve is an array, checked above)
}

TEST_CASE("a hardware config is read by the one JSON reader: bad JSON, duplicate keys, deep values",
          "[config]") {
  const std::string path = "trnsim_test_bad_config.json";
  const auto with_text = [&](const std::string& text) {
    {
      std::ofstream out(path);
      out << text;
    }
    std::string e = error_of([&] { load_hw_config(path); });
    std::remove(path.c_str());
    return e;
  };
  CHECK(with_text("{ not json") ==
        path +
            ": not valid JSON: parse error at line 1, column 4: syntax error while parsing object key - "
            "invalid literal; last read: '{ no'; expected string literal");
  CHECK(with_text(R"({"name": "a", "name": "b"})") == path + ": name: key appears twice in one object");
  CHECK(with_text(R"({"pe": {"clock_GHz": {"value": 1e400}}})") ==
        path + ": not valid JSON: number overflow parsing '1e400'");
  CHECK(with_text("{\"description\": " + std::string(100000, '[')) ==
        path + ": description: nested deeper than 64 levels");
}

TEST_CASE("messages show a short excerpt of a bad value, never the value", "[config]") {
  json big = json::array();
  for (int i = 0; i < 1000000; ++i) big.push_back(i);
  CHECK(error_of([&] {
          load_hw_config(kTrn3, {{"pe.clock_GHz", big}});
        }) ==
        kTrn3 +
            ": pe.clock_GHz.value: expected a number in [0.01, 100], found an array of 1000000 elements "
            "(from the override pe.clock_GHz=an array of 1000000 elements)");
  const std::string mega(1 << 20, 'z');
  CHECK(error_of([&] {
          load_hw_config(kTrn3, {{"pe.clock_GHz", mega}});
        }) == kTrn3 + ": pe.clock_GHz.value: expected a number in [0.01, 100], found \"" +
                  std::string(56, 'z') + "... (from the override pe.clock_GHz=\"" + std::string(56, 'z') +
                  "...)");
  CHECK(error_of([&] {
          load_hw_config(kTrn3, {{"name", mega}});
        }) == kTrn3 + ": name: expected 1-200 bytes of printable characters, found \"" +
                  std::string(56, 'z') + "... (from the override name=\"" + std::string(56, 'z') + "...)");
  CHECK(error_of([&] { load_hw_config(mega); }) == "unknown hardware config '" + std::string(60, 'z') +
                                                       "...' (known: trn1, trn2, trn3, or a .json path)");
  CHECK(error_of([&] { load_hw_config(mega + ".json"); }) ==
        "hardware config file '" + std::string(60, 'z') + "...': not a usable path (1048581 bytes)");
}

TEST_CASE("override values (--set): JSON under the reader's rules, or a bare word that is UTF-8",
          "[config]") {
  CHECK(parse_override("pe.clock_GHz=2").second == 2);
  CHECK(parse_override("name=my trn3").second == "my trn3");
  CHECK(parse_override("name=[1, 2").second == "[1, 2");  // not JSON: a bare word
  CHECK(error_of([] { parse_override("name=\xff"); }) == "--set name: the value '\xff' is not valid UTF-8");
  CHECK(error_of([] { parse_override("x=" + std::string(100, '[')); }) ==
        "--set x: (top level): nested deeper than 64 levels");
  CHECK(error_of([] { parse_override(R"(x={"a": 1, "a": 2})"); }) ==
        "--set x: a: key appears twice in one object");
  CHECK(error_of([] { parse_override("pe." + std::string(300, 'k') + "=1"); }) ==
        "--set pe." + std::string(57, 'k') + "...: key '" + std::string(60, 'k') +
            "...' has 300 bytes (keys have at most 256)");
  CHECK(error_of([] { parse_override("pe.a\tb=1"); }) ==
        "--set pe.a\\tb: key 'a\\tb' holds a control character");
}
