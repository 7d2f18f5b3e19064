// Quantized operand blocks of the MXFP8 pipeline: one operand's SBUF slots of x4 data [128, bk, block_f] and
// E8M0 scales [128, slots, block_f], which block (f, k) each step of the schedule uses, and how a block gets
// there: loaded (loaders.h) and quantized with one quantize_mx per K tile and load (DVE), copied as
// pre-quantized data and scales, or reloaded from the spill scratch (nkilib spill_reload in
// matmul_mxfp8_generic_api.py: a BF16 block quantized for the first time is written to an HBM scratch when it
// will be needed again after eviction; the scratch is private to each core under LNC2). Scale packing puts K
// tile t at offset 4 (t % 4) of slot t/4. DMA queues: loads SP (gathers POOL), spills POOL.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/lib/mxfp8/loaders.h"
#include "kernels/lib/mxfp8/operand.h"
#include "kernels/lib/mxfp8/plan.h"

namespace trnsim::kernels::mxfp8 {

class OperandBlocks {
 public:
  // `F` the operand's free size, [f_lo, f_lo + f_core) this core's part of it, tiles of `tile_f`, blocks of
  // `block_f` tiles, loads of `load_f` tiles, `nbuf` slots, `n_kblocks` K blocks.
  OperandBlocks(Kernel& k, const MatmulSpec& spec, const Operand& op, const Plan& plan, int64_t F,
                int64_t f_lo, int64_t f_core, int64_t tile_f, int64_t block_f, int64_t load_f, int nbuf,
                int n_kblocks, const std::string& tag);

  // Which slot serves block (fb, kb) at one step of the schedule.
  struct Use {
    int slot;
    bool miss;
    bool spill;   // quantized here and written to the scratch (a later miss reloads it)
    bool reload;  // read back from the scratch
  };
  // Slot policy: a block already in a slot is reused; a miss takes the slot the previous step did not use.
  std::vector<Use> schedule(const std::vector<std::pair<int64_t, int64_t>>& keys) const;

  // Loads (or reloads) block (fb, kb) into u.slot.
  void prepare(PsumBanks& banks, int64_t fb, int64_t kb, const Use& u);

  // Operand views of K tile kt (of block kb) and free range [f, f + n) inside the block, in slot `slot`.
  struct TileRef {
    View data, scales;
    uint8_t offset;
  };
  TileRef tile(int slot, int64_t kb, int64_t kt, int64_t f, int64_t n) const;

 private:
  // Whole-block DMA between a slot and its region of the spill scratch (write = spill, else reload).
  void transfer_spill(const View& qd, const View& qs, int64_t fc, int64_t bf, int64_t kb, int64_t nt,
                      bool write);

  const MatmulSpec& spec_;
  const Operand& op_;
  int64_t K_, kp_, TK_;  // contraction, partition rows per K tile, K tiles
  int64_t f_lo_, f_core_;
  int64_t block_f_, load_f_, bk_, slots_;
  bool packed_hbm_ = false;
  Loader loader_;
  std::vector<View> slot_data_, slot_scales_;
  View spill_data_, spill_scales_;
};

}  // namespace trnsim::kernels::mxfp8
