// The memory modules' TLM-2.0 target sockets, called directly: addresses, copies, DMI, the HBM latency
// annotated, and the errors of the base protocol.
#include <catch2/catch.hpp>

#include <tlm_utils/simple_initiator_socket.h>
#include <systemc>
#include <tlm>

#include "sim/config/hw_config.h"
#include "sim/isa/semantics.h"
#include "sim/model/memory/hbm.h"
#include "sim/model/memory/onchip_memory.h"

using namespace trnsim;

namespace {

// A read or write of `n` bytes at `address` into / from `data`.
struct Access : tlm::tlm_generic_payload {
  Access(tlm::tlm_command c, uint64_t address, uint8_t* data, unsigned n) {
    fill(*this, c, address, data, n);
  }
  static void fill(tlm::tlm_generic_payload& t, tlm::tlm_command c, uint64_t address, uint8_t* data,
                   unsigned n) {
    t.set_command(c);
    t.set_address(address);
    t.set_data_ptr(data);
    t.set_data_length(n);
    t.set_streaming_width(n);
  }
};

struct Initiator : sc_core::sc_module {
  explicit Initiator(sc_core::sc_module_name name) : sc_module(name) {}
  tlm_utils::simple_initiator_socket<Initiator> to_sbuf{"to_sbuf"}, to_psum{"to_psum"};
};

isa::Program two_tensors() {
  isa::Program p;
  p.num_cores = 1;
  isa::TensorDecl a;
  a.name = "a";
  a.dtype = isa::DType::F32;
  a.shape = {3, 5};  // 60 bytes
  p.tensors.push_back(a);
  a.name = "b";
  a.shape = {2};  // 8 bytes
  p.tensors.push_back(a);
  return p;
}

}  // namespace

TEST_CASE("HBM address map: tensors in declaration order at 4 KiB bases", "[model][memory]") {
  const model::HbmAddressMap map(two_tensors());
  CHECK(map.base(0) == 0);
  CHECK(map.size(0) == 60);
  CHECK(map.base(1) == 4096);
  CHECK(map.size(1) == 8);
  CHECK(map.tensor_at(59) == 0);
  CHECK(map.tensor_at(60) == -1);  // the gap up to the next base
  CHECK(map.tensor_at(4096 + 7) == 1);
  CHECK(map.tensor_at(4096 + 8) == -1);
}

TEST_CASE("Hbm: copies within a tensor, annotates hbm.latency_ns, grants DMI per tensor", "[model][memory]") {
  const isa::Program p = two_tensors();
  const auto hw = config::load_hw_config("trn2");
  auto state = isa::make_machine_state(p, hw.limits());
  const model::HbmAddressMap map(p);
  model::Hbm hbm("hbm", map, &state.hbm, timing::HbmTiming(hw.hbm));
  tlm::tlm_fw_transport_if<>& fw = hbm.socket.get_base_interface();

  uint8_t in[4] = {1, 2, 3, 4}, out[4] = {};
  Access w(tlm::TLM_WRITE_COMMAND, 4096 + 2, in, 4);
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  fw.b_transport(w, delay);
  CHECK(w.get_response_status() == tlm::TLM_OK_RESPONSE);
  CHECK(delay == sc_core::sc_time(240, sc_core::SC_NS));  // trn2 hbm.latency_ns
  CHECK(state.hbm[1].data()[2] == 1);
  CHECK(state.hbm[1].data()[5] == 4);
  Access r(tlm::TLM_READ_COMMAND, 4096 + 2, out, 4);
  CHECK(fw.transport_dbg(r) == 4);
  CHECK(out[3] == 4);

  tlm::tlm_dmi dmi;
  Access d(tlm::TLM_READ_COMMAND, 10, nullptr, 0);
  REQUIRE(fw.get_direct_mem_ptr(d, dmi));
  CHECK(dmi.get_dmi_ptr() == state.hbm[0].data());
  CHECK(dmi.get_start_address() == 0);
  CHECK(dmi.get_end_address() == 59);
  CHECK(dmi.is_read_write_allowed());

  SECTION("an access across a tensor's end or in a gap is an address error") {
    Access past(tlm::TLM_READ_COMMAND, 4096 + 6, out, 4);
    fw.b_transport(past, delay);
    CHECK(past.get_response_status() == tlm::TLM_ADDRESS_ERROR_RESPONSE);
    Access gap(tlm::TLM_READ_COMMAND, 100, out, 1);
    CHECK(fw.transport_dbg(gap) == 0);
    CHECK(gap.get_response_status() == tlm::TLM_ADDRESS_ERROR_RESPONSE);
    CHECK_FALSE(fw.get_direct_mem_ptr(gap, dmi));
  }
  SECTION("byte enables and a narrow streaming width are refused") {
    uint8_t be[4] = {0xFF, 0, 0xFF, 0};
    Access t(tlm::TLM_READ_COMMAND, 0, out, 4);
    t.set_byte_enable_ptr(be);
    t.set_byte_enable_length(4);
    fw.b_transport(t, delay);
    CHECK(t.get_response_status() == tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    Access s(tlm::TLM_READ_COMMAND, 0, out, 4);
    s.set_streaming_width(2);
    fw.b_transport(s, delay);
    CHECK(s.get_response_status() == tlm::TLM_BURST_ERROR_RESPONSE);
  }
}

TEST_CASE("Hbm without bytes (numerics off): timing only", "[model][memory]") {
  const isa::Program p = two_tensors();
  const auto hw = config::load_hw_config("trn2", {{"hbm.latency_ns", 12.5}});
  const model::HbmAddressMap map(p);
  model::Hbm hbm("hbm", map, nullptr, timing::HbmTiming(hw.hbm));
  tlm::tlm_fw_transport_if<>& fw = hbm.socket.get_base_interface();
  Access ignore(tlm::TLM_IGNORE_COMMAND, 0, nullptr, 1 << 20);  // no bytes, no bounds
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  fw.b_transport(ignore, delay);
  CHECK(ignore.get_response_status() == tlm::TLM_OK_RESPONSE);
  CHECK(delay == sc_core::sc_time(12500, sc_core::SC_PS));
  uint8_t out[4];
  Access r(tlm::TLM_READ_COMMAND, 0, out, 4);
  fw.b_transport(r, delay);
  CHECK(r.get_response_status() == tlm::TLM_COMMAND_ERROR_RESPONSE);
  tlm::tlm_dmi dmi;
  CHECK_FALSE(fw.get_direct_mem_ptr(r, dmi));
}

TEST_CASE("Sbuf and Psum: partition-major bytes, DMI over the whole memory, no delay", "[model][memory]") {
  const auto hw = config::load_hw_config("trn2");
  const auto limits = hw.limits();
  isa::Program p;
  p.num_cores = 1;
  auto state = isa::make_machine_state(p, limits);
  model::Sbuf sbuf("sbuf", &state.cores[0].sbuf, limits);
  model::Psum psum("psum", &state.cores[0].psum, limits);
  // A multi-passthrough socket takes its callbacks at the end of elaboration: bind an initiator, elaborate.
  Initiator engine("engine");
  engine.to_sbuf.bind(sbuf.target.socket);
  engine.to_psum.bind(psum.target.socket);
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  auto& to_sbuf = engine.to_sbuf;
  auto& to_psum = engine.to_psum;

  // Partition 3, byte 8 of the SBUF.
  const uint64_t a = 3ull * limits.sbuf_bytes_per_partition + 8;
  uint8_t in[2] = {0x12, 0x34};
  Access w(tlm::TLM_WRITE_COMMAND, a, in, 2);
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  to_sbuf->b_transport(w, delay);
  CHECK(w.get_response_status() == tlm::TLM_OK_RESPONSE);
  CHECK(delay == sc_core::SC_ZERO_TIME);
  CHECK(state.cores[0].sbuf[a + 1] == 0x34);
  tlm::tlm_dmi dmi;
  REQUIRE(to_psum->get_direct_mem_ptr(w, dmi));
  CHECK(dmi.get_dmi_ptr() == state.cores[0].psum.data());
  CHECK(dmi.get_end_address() == uint64_t{limits.partitions} * limits.psum_bytes_per_partition - 1);
  // One past the end.
  Access past(tlm::TLM_READ_COMMAND, state.cores[0].sbuf.size(), in, 1);
  to_sbuf->b_transport(past, delay);
  CHECK(past.get_response_status() == tlm::TLM_ADDRESS_ERROR_RESPONSE);
}
