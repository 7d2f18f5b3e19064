#include "kernels/api/view.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "sim/base/error.h"
#include "sim/base/small_vector.h"
#include "sim/isa/semantics.h"

namespace trnsim::kernels {

uint32_t elem_bytes(isa::DType t) {
  return isa::dtype_size(t);
}
const char* dtype_str(isa::DType t) {
  return isa::dtype_name(t);
}

const char* space_str(isa::MemSpace s) {
  switch (s) {
    case isa::MemSpace::SBUF:
      return "sbuf";
    case isa::MemSpace::PSUM:
      return "psum";
    case isa::MemSpace::HBM:
      return "hbm";
  }
  return "?";
}

std::vector<int64_t> View::shape() const {
  std::vector<int64_t> s;
  for (const D& d : dims_) s.push_back(d.size);
  return s;
}

const std::vector<int64_t>& View::tensor_shape() const {
  static const std::vector<int64_t> none;
  return storage_ && space_ == isa::MemSpace::HBM ? storage_->hbm_shape : none;
}

int64_t View::size(int dim) const {
  if (dim < 0 || dim >= rank()) throw InputError(fmt::format("{}: no dim {}", describe(), dim));
  return dims_[dim].size;
}

int64_t View::free_elements() const {
  int64_t n = 1;
  for (size_t i = 1; i < dims_.size(); ++i) n *= dims_[i].size;
  return n;
}

const std::string& View::name() const {
  static const std::string none;
  return storage_ ? storage_->name : none;
}

std::string View::describe() const {
  if (!valid()) return "absent operand";
  return fmt::format("{} '{}' [{}] {}", space_str(space_), name(), fmt::join(shape(), ", "),
                     dtype_str(dtype_));
}

View View::index(const std::vector<Slice>& idx) const {
  return index(idx.data(), idx.size());
}

View View::index(const Slice* idx, size_t num_idx) const {
  if (static_cast<int>(num_idx) > rank())
    throw InputError(fmt::format("{}: {} indices for a rank-{} view", describe(), num_idx, rank()));
  View v;
  v.storage_ = storage_;
  v.owner_ = owner_;
  v.serial_ = serial_;
  v.space_ = space_;
  v.dtype_ = dtype_;
  v.tensor_ = tensor_;
  v.partition_start_ = partition_start_;
  v.offset_bytes_ = offset_bytes_;
  auto& dims = v.dims_;
  const int64_t es = elem_bytes(dtype_);
  for (int i = 0; i < rank(); ++i) {
    const D& d = dims_[i];
    if (i >= static_cast<int>(num_idx)) {
      dims.push_back(d);
      continue;
    }
    const Slice& s = idx[i];
    const int64_t stop = s.stop == kEnd ? d.size : s.stop;
    if (s.step <= 0 || s.start < 0 || s.start >= stop || stop > d.size)
      throw InputError(fmt::format("{}: slice {}:{}:{} of dim {} (size {}) is empty or out of range",
                                   describe(), s.start, s.stop == kEnd ? d.size : s.stop, s.step, i, d.size));
    const int64_t n = (stop - s.start + s.step - 1) / s.step;
    if (i == 0 && space_ != isa::MemSpace::HBM) {
      if (s.step != 1)
        throw InputError(
            fmt::format("{}: partition slices must be contiguous (step {})", describe(), s.step));
      v.partition_start_ += static_cast<uint32_t>(s.start);
      dims.push_back({0, n});
      continue;
    }
    v.offset_bytes_ += s.start * d.stride * es;
    if (s.single && i > 0) continue;  // an integer index drops a free dim
    dims.push_back({d.stride * s.step, n});
  }
  if (dims.size() == 1) dims.push_back({1, 1});  // keep one free dim
  return v;
}

View View::slice(int dim, int64_t start, int64_t stop, int64_t step) const {
  if (dim < 0 || dim >= rank()) throw InputError(fmt::format("{}: no dim {} to slice", describe(), dim));
  std::vector<Slice> idx(dim + 1);
  idx[dim] = Slice(start, stop, step);
  return index(idx.data(), idx.size());
}

namespace {

// No-copy reshape of (stride, size) dims, as numpy does it: the new dims of `sizes` appended to `out`; false
// if impossible. On the builder's hot path: no allocation while the views keep to SmallVector's inline dims.
template <class D, class Out>
bool reshape_dims(const D* old_dims, size_t num_old, const int64_t* sizes, size_t num_sizes, Out& out) {
  SmallVector<D, 8> old;
  for (size_t i = 0; i < num_old; ++i)
    if (old_dims[i].size != 1) old.push_back(old_dims[i]);
  const size_t base = out.size();
  for (size_t i = 0; i < num_sizes; ++i) out.push_back(D{1, sizes[i]});
  D* const o = out.data() + base;
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < num_sizes && oi < old.size()) {
    int64_t np = sizes[ni], op = old[oi].size;
    while (np != op) {
      if (np < op) {
        if (nj >= num_sizes) return false;
        np *= sizes[nj++];
      } else {
        if (oj >= old.size()) return false;
        op *= old[oj++].size;
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (old[k].stride != old[k + 1].stride * old[k + 1].size) return false;
    o[nj - 1].stride = old[oj - 1].stride;
    for (size_t k = nj - 1; k > ni; --k) o[k - 1].stride = o[k].stride * o[k].size;
    ni = nj++;
    oi = oj++;
  }
  return oi >= old.size();
}

}  // namespace

View View::reshape(const std::vector<int64_t>& shape) const {
  int64_t n_old = 1, n_new = 1;
  for (const D& d : dims_) n_old *= d.size;
  for (int64_t s : shape) {
    if (s <= 0) throw InputError(fmt::format("{}: reshape to a shape with size {}", describe(), s));
    n_new *= s;
  }
  // The shape as the errors name it, formatted only for one (a reshape is on the builder's hot path).
  const auto want = [&] { return fmt::format("[{}]", fmt::join(shape, ", ")); };
  if (shape.size() < 2 || n_old != n_new)
    throw InputError(fmt::format("{}: cannot reshape to {} (element count or rank)", describe(), want()));
  View v = *this;
  bool ok;
  decltype(dims_)& out = v.dims_;
  out.clear();
  if (space_ == isa::MemSpace::HBM) {
    ok = reshape_dims(dims_.data(), dims_.size(), shape.data(), shape.size(), out);
  } else {
    if (shape[0] != partitions())
      throw InputError(fmt::format("{}: reshape to {} changes the partition count", describe(), want()));
    out.push_back(dims_[0]);  // the partition dim stays
    ok = reshape_dims(dims_.data() + 1, dims_.size() - 1, shape.data() + 1, shape.size() - 1, out);
  }
  if (!ok)
    throw InputError(fmt::format("{}: cannot reshape to {} without a copy (strides)", describe(), want()));
  return v;
}

View View::permute(const std::vector<int>& order) const {
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> iota(rank());
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota)
    throw InputError(fmt::format("{}: permute order [{}] is not a permutation of its {} dims", describe(),
                                 fmt::join(order, ", "), rank()));
  if (space_ != isa::MemSpace::HBM && order[0] != 0)
    throw InputError(
        fmt::format("{}: the partition dim of an on-chip tile stays first (use a transpose "
                    "instruction to move data across partitions)",
                    describe()));
  View v = *this;
  for (int i = 0; i < rank(); ++i) v.dims_[i] = dims_[order[i]];
  return v;
}

View View::bitcast(isa::DType dtype) const {
  const int64_t from = elem_bytes(dtype_), to = elem_bytes(dtype);
  View v = *this;
  v.dtype_ = dtype;
  if (from == to) return v;
  const auto bad = [&](const char* why) {
    return InputError(fmt::format("{}: cannot bitcast to {}: {}", describe(), dtype_str(dtype), why));
  };
  D& inner = v.dims_.back();
  if (inner.stride != 1 && inner.size != 1) throw bad("the innermost dim is not contiguous");
  if ((inner.size * from) % to != 0) throw bad("the innermost dim's bytes do not divide into the new dtype");
  if (offset_bytes_ % to != 0) throw bad("the byte offset is not aligned to the new dtype");
  inner.size = inner.size * from / to;
  inner.stride = 1;
  const bool hbm = space_ == isa::MemSpace::HBM;
  for (size_t i = hbm ? 0 : 1; i + 1 < v.dims_.size(); ++i) {
    if ((v.dims_[i].stride * from) % to != 0) throw bad("an outer stride does not divide into the new dtype");
    v.dims_[i].stride = v.dims_[i].stride * from / to;
  }
  return v;
}

View View::broadcast(int dim, int64_t size) const {
  if (dim < 1 || dim >= rank() || dims_[dim].size != 1 || size < 1)
    throw InputError(fmt::format("{}: broadcast needs a size-1 free dim (dim {})", describe(), dim));
  View v = *this;
  v.dims_[dim] = {0, size};
  return v;
}

isa::AccessPattern View::ap() const {
  isa::AccessPattern a;
  if (!valid()) return a;
  a.space = space_;
  a.dtype = dtype_;
  a.tensor = tensor_;
  a.partitions = static_cast<uint32_t>(dims_[0].size);
  if (space_ == isa::MemSpace::HBM)
    a.partition_stride = dims_[0].stride;
  else
    a.partition_start = partition_start_;
  a.offset_bytes = offset_bytes_;
  const auto set_dims = [&](const D* free, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (free[i].size > UINT32_MAX)
        throw InputError(fmt::format("{}: dim size {} too large", describe(), free[i].size));
    a.ndim = static_cast<uint8_t>(n);
    for (size_t i = 0; i < n; ++i) a.set_dim(i, {free[i].stride, static_cast<uint32_t>(free[i].size)});
  };
  if (dims_.size() <= 5) {  // at most 4 free dims: as they are (most views)
    set_dims(dims_.data() + 1, dims_.size() - 1);
    return a;
  }
  // More than 4: merge contiguous neighbours, drop size-1 dims.
  SmallVector<D, 6> merged;
  for (auto d = dims_.begin() + 1; d != dims_.end(); ++d) {
    if (d->size == 1) continue;
    if (!merged.empty() && merged.back().stride == d->stride * d->size) {
      merged.back() = {d->stride, merged.back().size * d->size};
    } else {
      merged.push_back(*d);
    }
  }
  if (merged.empty()) merged.push_back({1, 1});
  if (merged.size() > 4)
    throw InputError(fmt::format("{}: {} free dims after merging; access patterns have at most 4", describe(),
                                 merged.size()));
  set_dims(merged.data(), merged.size());
  return a;
}

View::Region View::region(bool whole_rows) const {
  const int64_t es = elem_bytes(dtype_);
  // Byte extent of the free dims relative to the start offset.
  int64_t flo = 0, fhi = es;
  for (size_t i = 1; i < dims_.size(); ++i) {
    const int64_t span = (dims_[i].size - 1) * dims_[i].stride * es;
    (span < 0 ? flo : fhi) += span;
  }
  if (space_ != isa::MemSpace::HBM) {
    if (storage_->whole_partitions > 0)
      return {0, 0, storage_->whole_partitions, storage_->whole_lo, storage_->whole_hi};
    return {0, partition_start_, partition_start_ + dims_[0].size, offset_bytes_ + flo, offset_bytes_ + fhi};
  }
  const int64_t rb = std::max<int64_t>(1, storage_->hbm_row_bytes);
  const int64_t rows = storage_->hbm_rows;
  const int64_t base_row = offset_bytes_ / rb, col = offset_bytes_ % rb;
  if (whole_rows) {
    // An index stepping by less than a tensor row (e.g. single elements) can reach any byte.
    if ((dims_[0].stride * es) % rb != 0) return {tensor_, 0, rows, 0, rb};
    if (col + flo >= 0 && col + fhi <= rb) return {tensor_, 0, rows, col + flo, col + fhi};
    return {tensor_, 0, rows, 0, rb};
  }
  // Split the dims into whole-row steps and in-row steps.
  int64_t rlo = 0, rhi = 0, ilo = 0, ihi = es;
  for (const D& d : dims_) {
    const int64_t sb = d.stride * es;
    const int64_t span = (d.size - 1) * sb;
    if (sb % rb == 0)
      (span < 0 ? rlo : rhi) += span / rb;
    else
      (span < 0 ? ilo : ihi) += span;
  }
  if (col + ilo >= 0 && col + ihi <= rb)
    return {tensor_, base_row + rlo, base_row + rhi + 1, col + ilo, col + ihi};
  // Fallback: every row the byte range touches.
  int64_t lo = offset_bytes_, hi = offset_bytes_ + es;
  for (const D& d : dims_) {
    const int64_t span = (d.size - 1) * d.stride * es;
    (span < 0 ? lo : hi) += span;
  }
  const int64_t r0 = std::max<int64_t>(0, lo / rb), r1 = (hi - 1) / rb + 1;
  if (r1 - r0 == 1) return {tensor_, r0, r1, lo - r0 * rb, hi - r0 * rb};
  return {tensor_, r0, r1, 0, rb};
}

View View::pattern(isa::DType dtype, int64_t offset_bytes,
                   const std::vector<std::pair<int64_t, int64_t>>& dims, uint32_t partition_start) const {
  if (!valid() || dims.empty())
    throw InputError(fmt::format("{}: pattern needs a tile or tensor and at least one dim", describe()));
  const bool hbm = space_ == isa::MemSpace::HBM;
  const int64_t es = elem_bytes(dtype);
  View v = *this;
  v.dtype_ = dtype;
  v.offset_bytes_ = offset_bytes_ + offset_bytes;
  v.dims_.clear();
  // Bytes [lo, hi) the pattern reaches, relative to this view's start (a negative stride steps backwards
  // from the first element).
  int64_t lo = offset_bytes, hi = offset_bytes + es;
  for (size_t i = 0; i < dims.size(); ++i) {
    const auto [stride, size] = dims[i];
    if (size < 1)
      throw InputError(
          fmt::format("{}: pattern dim {} is [{}, {}] (size >= 1)", describe(), i, stride, size));
    if (i == 0 && !hbm) {
      v.dims_.push_back({0, size});
      continue;
    }
    const int64_t span = (size - 1) * stride * es;
    (span < 0 ? lo : hi) += span;
    v.dims_.push_back({stride, size});
  }
  if (v.dims_.size() == 1) v.dims_.push_back({1, 1});
  // This view's own extent, relative to its start: its partitions, and the bytes its free dims (HBM: all
  // dims) span.
  int64_t own_lo = 0, own_hi = elem_bytes(dtype_);
  for (size_t i = hbm ? 0 : 1; i < dims_.size(); ++i) {
    const int64_t span = (dims_[i].size - 1) * dims_[i].stride * elem_bytes(dtype_);
    (span < 0 ? own_lo : own_hi) += span;
  }
  if (lo < own_lo || hi > own_hi)
    throw InputError(fmt::format("{}: pattern bytes [{}, {}) outside its bytes [{}, {})", describe(), lo, hi,
                                 own_lo, own_hi));
  if (!hbm) {
    const int64_t p1 = static_cast<int64_t>(partition_start) + dims[0].second;
    if (p1 > partitions())
      throw InputError(fmt::format("{}: pattern partitions [{}, {}) outside its {}", describe(),
                                   partition_start, p1, partitions()));
    v.partition_start_ = partition_start_ + partition_start;
  }
  return v;
}

View View::index_rows(int64_t rows) const {
  if (space_ != isa::MemSpace::HBM || rows < 1)
    throw InputError(
        fmt::format("{}: index_rows({}) needs an HBM view and at least one row", describe(), rows));
  View v = *this;
  v.dims_[0].size = rows;
  return v;
}

View::Region View::region_any_row(bool whole) const {
  Region r = region(false);
  if (space_ != isa::MemSpace::HBM) return r;
  if (whole || r.r1 - r.r0 > 1) r.c0 = 0, r.c1 = std::max<int64_t>(1, storage_->hbm_row_bytes);
  r.r0 = 0;
  r.r1 = storage_->hbm_rows;
  return r;
}

}  // namespace trnsim::kernels
