"""Which link profiles `mhc simulate --link FILE` accepts, and the link it then simulates, read from
docs/simulator.md ("Link models": the profile's fields, its bounds table, the name's characters, the
16 MiB limit) alone; shares no code with sim/.

judge(profile_text) returns ("ok", link) with the figures the run's config holds, or ("refused",
field) with the field the refusal names (None where the document names none: not JSON, too large).
Standard library only."""
import json
import unicodedata

BW = (1e3, 1e15)
MAX_CHUNK = 1 << 56
LIMIT = 16 << 20


class Bad(Exception):
    def __init__(self, field):
        super().__init__(field)
        self.field = field


def number(v, field):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        raise Bad(field)
    return float(v)


def within(v, lo, hi, field, lo_open=False, hi_open=False):
    x = number(v, field)
    if x < lo or x > hi or (lo_open and x == lo) or (hi_open and x == hi):
        raise Bad(field)
    return x


def shown(name):
    """A name shown as it is: no control character, line separator or invisible format character."""
    for ch in name:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            return False
    return True


def judge(text):
    """("ok", link) or ("refused", fields): every field the document refuses (a refusal names one of
    them: the document gives no order), [None] for text that is not a profile at all."""
    if len(text.encode()) > LIMIT:
        return "refused", [None]
    try:
        p = json.loads(text)
    except ValueError:
        return "refused", [None]
    if not isinstance(p, dict):
        return "refused", [None]
    bad, link = [], {}

    def check(fn):
        try:
            return fn()
        except Bad as e:
            bad.append(e.field)
            return None

    def name():
        if "name" not in p or not isinstance(p["name"], str) or not shown(p["name"]):
            raise Bad("name")
    check(name)
    for d in ("h2d", "d2h"):
        if d not in p or not isinstance(p[d], dict):
            bad.append(d)
            continue
        for k, lo, hi in (("bandwidth_Bps", *BW), ("latency_s", 0.0, 10.0)):
            if k not in p[d]:
                bad.append(f"{d}.{k}")
            else:
                link[f"{d}.{k}"] = check(lambda: within(p[d][k], lo, hi, f"{d}.{k}"))

    def engines():
        ce = p.get("copy_engines")
        if isinstance(ce, bool) or not isinstance(ce, int) or not 1 <= ce <= 64:
            raise Bad("copy_engines")
        return ce
    link["copy_engines"] = check(engines)
    link["duplex_factor"] = check(lambda: within(p.get("duplex_factor"), 0.0, 1.0, "duplex_factor", lo_open=True))
    for k in ("nccl_share", "memcpy_share"):
        link[k] = check(lambda: within(p[k], 0.0, 1.0, k, hi_open=True)) if k in p else 0.5
    if "source" in p and not isinstance(p["source"], str):
        bad.append("source")
    if "notes" in p and (not isinstance(p["notes"], list) or not all(isinstance(n, str) for n in p["notes"])):
        bad.append("notes")
    if "measured_load_average" in p:
        check(lambda: number(p["measured_load_average"], "measured_load_average"))
    if "by_chunk" in p:
        check(lambda: chunks(p["by_chunk"], bad))
    return ("refused", bad) if bad else ("ok", link)


def chunks(rows, bad):
    if not isinstance(rows, list):
        raise Bad("by_chunk")
    last = 0
    for row in rows:
        if not isinstance(row, dict):
            raise Bad("by_chunk")
        if "bytes" not in row:
            bad.append("bytes")
        else:
            try:
                b = number(row["bytes"], "bytes")
                if not b.is_integer() or not 1 <= b <= MAX_CHUNK or b <= last:   # whole, increasing
                    raise Bad("bytes")
                last = b
            except Bad as e:
                bad.append(e.field)
        rates = ("h2d_Bps", "d2h_Bps", "both_h2d_Bps", "both_d2h_Bps")
        for k in rates:
            try:
                if k in row and number(row[k], k) != 0:   # 0: not measured
                    within(row[k], *BW, k)
            except Bad as e:
                bad.append(e.field)
        if all(k not in row or row[k] == 0 for k in rates):   # a row that measures no rate
            bad.append("by_chunk")
