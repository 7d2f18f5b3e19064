"""nki.typing: the `tensor` and `mutable_tensor` annotations (`t: tensor[M, N]`), which trnsim accepts and
ignores."""

from ._tensor import NkiTensor


class _TensorType:
    def __getitem__(self, shape):
        return NkiTensor

    def __instancecheck__(self, x):
        return isinstance(x, NkiTensor)


tensor = _TensorType()
# nki-library's router_topk annotates the tensors it writes in place and returns so. The annotation only: any
# input a kernel writes is written in place, and one it returns is an in-place output (docs/nki.md).
mutable_tensor = tensor
