"""One GPU table for the whole toolkit: mhc_torch's GPUS are the rows of datasets/gpus.tsv (which
`mhc generate` embeds too), shipped in the package as gpus.tsv, so that an installed mhc_torch
finds it."""
import csv
import os

from mhc_torch import gpus

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _rows():
    with open(os.path.join(REPO, "datasets", "gpus.tsv"), newline="", encoding="utf-8") as f:
        lines = [line for line in f if line.strip() and not line.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


def test_the_capture_gpus_are_the_table_rows():
    rows = _rows()
    assert [r["name"] for r in rows] == list(gpus.GPUS) == ["a100-40g", "a100-80g", "h100-pcie", "h100-sxm",
                                                             "h200", "l40s"]
    for r in rows:
        spec = gpus.gpu(r["name"])
        assert (spec.name, spec.device_name, spec.memory_bytes) == (r["name"], r["device_name"], int(r["memory_bytes"]))
        assert (spec.bf16_flops, spec.tf32_flops, spec.fp32_flops, spec.hbm_bw, spec.host_link_bw) == tuple(
            float(r[c]) for c in ("bf16_flops", "tf32_flops", "fp32_flops", "hbm_bw", "host_link_bw"))
        assert spec.compute_capability == tuple(int(x) for x in r["compute_capability"].split("."))
        assert (spec.sm_count, spec.max_threads_per_sm) == (int(r["sm_count"]), int(r["max_threads_per_sm"]))
        assert spec.launch_overhead_s == 2e-6   # an assumption of gpus.py, not a column
    # The datasheets' figures (the file's sources): the H100 SXM's dense bf16 peak, the L40S's memory.
    assert gpus.gpu("h100-sxm").bf16_flops == 989.4e12 and gpus.gpu("l40s").memory_bytes == 48 << 30


def test_the_package_ships_the_table():
    # In the source tree the package's gpus.tsv is a link to datasets/gpus.tsv; a wheel carries a
    # copy (test_schema_shared.py builds one and imports it from elsewhere).
    shipped = os.path.join(REPO, "python", "mhc_torch", "gpus.tsv")
    assert os.path.realpath(shipped) == os.path.join(REPO, "datasets", "gpus.tsv")


_UNITS = {"TFLOP/s": "e12", "TB/s": "e12", "GB/s": "e9", "GB": "e9"}


def _figure(cell, unit="e12"):
    """A docs table's cell as a number: '2.039 TB/s', '25 GB/s (HDR)', '80 GiB', '141 GB', '312'
    (in `unit`), read as the file's figures are written, so that equal figures compare equal."""
    words = cell.split()
    if len(words) > 1 and words[1] == "GiB":
        return int(words[0]) << 30
    return float(words[0].replace(",", "") + (_UNITS[words[1]] if len(words) > 1 else unit))


def _doc_table(doc, header_start):
    """The body rows of the table in docs/DOC whose header row starts with `header_start`, as cells."""
    with open(os.path.join(REPO, "docs", doc), encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_the_docs_tables_say_the_table():
    file_rows = {r["name"]: r for r in _rows()}
    # docs/torch.md: every GPU of --gpu, by its name
    doc = _doc_table("torch.md", "| name | bf16 TFLOP/s |")
    assert [c[0].strip("`") for c in doc] == list(file_rows)
    for name, bf16, fp32, hbm, memory in doc:
        r = file_rows[name.strip("`")]
        assert (_figure(bf16), _figure(fp32), _figure(hbm), _figure(memory)) == (
            float(r["bf16_flops"]), float(r["fp32_flops"]), float(r["hbm_bw"]), int(r["memory_bytes"])), name
    # docs/datasets.md: the generator's GPUs, in the file's order
    doc = _doc_table("datasets.md", "| GPU | bf16 dense |")
    generator = [r for r in file_rows.values() if r["generate"] != "-"]
    assert len(doc) == len(generator)
    for cells, r in zip(doc, generator):
        assert [_figure(c) for c in cells[1:]] == [
            float(r[c]) for c in ("bf16_flops", "tf32_flops", "fp32_flops", "hbm_bw")] + [
            int(r["memory_bytes"]), float(r["nvlink_bw"]), float(r["net_bw"])], cells[0]
