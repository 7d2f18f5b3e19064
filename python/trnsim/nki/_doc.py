"""The table of supported and unsupported nki.isa / nki.language calls in docs/nki.md, generated from the
implementation (isa.SUPPORTED / UNSUPPORTED, language.SUPPORTED / UNSUPPORTED and the functions' docstrings).

    python3 -m trnsim.nki._doc --write docs/nki.md   # rewrites the table between the markers
    python3 -m trnsim.nki._doc --check docs/nki.md   # exit 1 if the committed table differs
"""

import sys

BEGIN = "<!-- BEGIN generated: python3 -m trnsim.nki._doc --write docs/nki.md -->"
END = "<!-- END generated -->"


def _first_line(obj):
    doc = (getattr(obj, "__doc__", None) or "").strip()
    return " ".join(doc.split("\n\n")[0].split()) if doc else ""


def table():
    from . import _tensor, isa, language

    out = ["### nki.isa", "", "| call | calling styles | what trnsim models |", "|---|---|---|"]
    both = {"nc_matmul", "nc_transpose", "activation", "activation_reduce", "tensor_tensor", "tensor_scalar",
            "tensor_reduce", "tensor_copy", "memset", "iota", "dma_transpose", "reciprocal", "scalar_tensor_tensor",
            "bn_stats", "bn_aggr", "affine_select", "max8", "nc_find_index8", "nc_match_replace8",
            "tensor_scalar_reduce", "tensor_tensor_scan", "tensor_partition_reduce"}
    for name in isa.SUPPORTED:
        style = "current (`dst=`) and earlier (returns a tile)" if name in both else "current"
        if name in ("dma_copy",):
            style = "keyword `dst=`, `src=` (both)"
        if name == "nc_stream_shuffle":
            style = "current (`dst, src`) and earlier (`src, dst`, `mask=`): both write dst"
        out.append(f"| `nisa.{name}` | {style} | {_first_line(getattr(isa, name))} |")
    out += ["", "Not modelled (calling one raises NkiUnsupported naming the call and the kernel line):", ""]
    out.append(", ".join(f"`nisa.{n}`" for n in sorted(list(isa.UNSUPPORTED) + ["tensor_copy_predicated"])) + ".")
    out += ["", "### nki.language", "", "| call | lowering / meaning |", "|---|---|"]
    for name in language.SUPPORTED:
        obj = getattr(language, name)
        out.append(f"| `nl.{name}` | {_first_line(obj)} |")
    out += ["", "Not modelled (calling one raises NkiUnsupported):", ""]
    out.append(", ".join(f"`nl.{n}`" for n in sorted(language.UNSUPPORTED)) + ".")
    out += ["", "### nl.NkiTensor methods", "", "| method | meaning (a view: no instruction unless stated) |",
            "|---|---|"]
    for name in _tensor.NKI_METHODS:
        out.append(f"| `t.{name}` | {_first_line(getattr(_tensor.NkiTensor, name))} |")
    out += ["", "Also `expand_dim` (= `expand_dims`), `reinterpret_cast` and `bitcast` (= `view`), and the attributes "
            "`shape`, `dtype`, `ndim`, `size`, `itemsize`, `buffer`, `name`, `strides`, `offset`. Not modelled "
            "(NkiUnsupported naming it and the kernel line; any other attribute too): "
            + ", ".join(f"`t.{n}`" for n in _tensor.NKI_UNMODELLED) + "."]
    return "\n".join(out) + "\n"


def _splice(text, body):
    if BEGIN not in text or END not in text:
        raise SystemExit("docs/nki.md lacks the generated-table markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + body + END + tail


def main(argv):
    if len(argv) != 2 or argv[0] not in ("--write", "--check"):
        print(__doc__)
        return 2
    path = argv[1]
    with open(path) as f:
        text = f.read()
    new = _splice(text, table())
    if argv[0] == "--write":
        with open(path, "w") as f:
            f.write(new)
        return 0
    if new != text:
        print(f"{path}: the table of supported calls is stale; run python3 -m trnsim.nki._doc --write {path}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
