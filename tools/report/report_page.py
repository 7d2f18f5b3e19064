"""Shared pieces of trnsim's HTML reports (sweep_report.py, run_report.py): matplotlib set up for
reproducible SVG, each figure saved as SVG and PNG and inlined in one self-contained page (no network), and
a small script that checks, once the page has loaded, that every plot holds drawn marks (the headless
Chromium test reads the result from the DOM: body data-report-ok, data-js-errors)."""

import html
import io
import os
import sys
import tempfile

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # the caller says how to install it (exit status 3)
    print("trnsim report: matplotlib is missing: apt-get install python3-matplotlib", file=sys.stderr)
    sys.exit(3)

matplotlib.rcParams.update(
    {
        "svg.fonttype": "path",  # glyphs as paths: the page needs no fonts
        "svg.hashsalt": "trnsim",  # the same ids on every run
        "figure.dpi": 100,
        "savefig.dpi": 110,
        "font.size": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
    }
)

CHECK_SCRIPT = """
window.addEventListener('error', function (e) {
  var b = document.body, prev = b.getAttribute('data-js-errors') || '';
  b.setAttribute('data-js-errors', prev + (e.message || 'error') + '; ');
});
window.addEventListener('load', function () {
  var figs = document.querySelectorAll('figure.plot'), empty = [];
  figs.forEach(function (f) {
    var marks = f.querySelectorAll('svg path, svg use, svg rect').length;
    f.setAttribute('data-marks', marks);
    if (marks < 5) empty.push(f.id);
  });
  document.querySelectorAll('table.sortable th').forEach(function (th, i) {
    th.addEventListener('click', function () { sortTable(th.closest('table'), th.cellIndex); });
  });
  document.body.setAttribute('data-plots', figs.length);
  document.body.setAttribute('data-empty-plots', empty.join(' '));
  document.body.setAttribute('data-report-ok', empty.length === 0 ? 'yes' : 'no');
});
function sortTable(t, col) {
  var rows = Array.prototype.slice.call(t.tBodies[0].rows);
  var asc = t.getAttribute('data-sort') !== col + 'a';
  rows.sort(function (a, b) {
    var x = a.cells[col].textContent, y = b.cells[col].textContent;
    var nx = parseFloat(x), ny = parseFloat(y);
    var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
    return asc ? c : -c;
  });
  rows.forEach(function (r) { t.tBodies[0].appendChild(r); });
  t.setAttribute('data-sort', col + (asc ? 'a' : 'd'));
}
"""

STYLE = """
body { font-family: sans-serif; margin: 1.5em; max-width: 1200px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #f0f0f0; cursor: pointer; } td.l, th.l { text-align: left; }
figure.plot { margin: 0.5em 0; } figure.plot svg { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; } .note { color: #555; font-size: 0.9em; }
code { font-size: 0.85em; background: #f6f6f6; word-break: break-all; }
"""


def esc(x):
    return html.escape(str(x), quote=True)


def write_atomic(path, data):
    """Writes bytes or text to path through a temporary in the same folder, renamed into place."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp.", dir=folder)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class Page:
    def __init__(self, title, plots_dir=None):
        self.title = title
        self.parts = []
        self.plots_dir = plots_dir  # also export each plot as SVG and PNG here

    def h(self, level, text):
        self.parts.append("<h%d>%s</h%d>" % (level, esc(text), level))

    def p(self, text, cls=None):
        self.parts.append("<p%s>%s</p>" % (' class="%s"' % cls if cls else "", text))

    def raw(self, text):
        self.parts.append(text)

    def table(self, head, rows, left=(), sortable=True):
        out = ['<table class="%s"><thead><tr>' % ("sortable" if sortable else "")]
        for i, c in enumerate(head):
            out.append('<th class="%s">%s</th>' % ("l" if i in left else "", esc(c)))
        out.append("</tr></thead><tbody>")
        for r in rows:
            out.append("<tr>")
            for i, c in enumerate(r):
                out.append('<td class="%s">%s</td>' % ("l" if i in left else "", esc(c)))
            out.append("</tr>")
        out.append("</tbody></table>")
        self.parts.append("".join(out))

    def figure(self, fig, name, caption):
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
        svg = buf.getvalue()
        if self.plots_dir:
            os.makedirs(self.plots_dir, exist_ok=True)
            write_atomic(os.path.join(self.plots_dir, name + ".svg"), svg)
            png = io.BytesIO()
            fig.savefig(png, format="png", bbox_inches="tight", metadata={"Software": None})
            write_atomic(os.path.join(self.plots_dir, name + ".png"), png.getvalue())
        plt.close(fig)
        svg = svg[svg.find("<svg") :]
        self.parts.append(
            '<figure class="plot" id="%s">%s<figcaption>%s</figcaption></figure>' % (esc(name), svg, esc(caption))
        )

    def html(self):
        return (
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style>"
            "<script>%s</script></head><body>\n<h1>%s</h1>\n%s\n</body></html>\n"
            % (esc(self.title), STYLE, CHECK_SCRIPT, esc(self.title), "\n".join(self.parts))
        )


def fmt_num(v, digits=4):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e7 or abs(v) < 1e-3):
            return "%.*g" % (digits, v)
        t = "%.*f" % (max(0, digits - len(str(int(abs(v))))), v)
        return t.rstrip("0").rstrip(".") if "." in t else t
    return str(v)


def fmt_value(v):
    """An axis value as the sweep file writes it."""
    import json

    if isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"))


def roofline_axes(ax, peaks, bandwidths, xmin, xmax):
    """Draws the roofs (compute peak, HBM bandwidth x intensity) of each (peak TFLOP/s, GB/s) pair."""
    import numpy as np

    xs = np.logspace(np.log10(xmin), np.log10(xmax), 200)
    for i, (pk, bw) in enumerate(sorted(set(zip(peaks, bandwidths)))[:6]):
        roof = np.minimum(pk, bw * xs / 1000.0)  # GB/s x FLOP/byte = GFLOP/s; /1000: TFLOP/s
        ax.plot(xs, roof, color="C%d" % (i + 1), lw=1.2, label="roof: %s TFLOP/s, %s GB/s" % (fmt_num(pk), fmt_num(bw)))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (useful FLOP per HBM byte moved)")
    ax.set_ylabel("achieved TFLOP/s")
