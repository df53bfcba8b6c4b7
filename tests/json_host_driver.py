"""A host driver written from a learner's JSON description alone (``onchip generate``'s ``<top>.json``).

It imports json, sys and numpy, never onchip: the test runs it in a fresh interpreter and it checks
at the end that onchip was not loaded. Usage:

    python json_host_driver.py pack DESIGN.json STREAM.json OUT.json
        STREAM: {"x": [[float]], "y": [[float]], "kind": ["TARGET" | "PREDICT" | "ERROR", ...]}
        OUT: {"x_raw", "y_raw", "kind", "s_words" (core s__payload), "s_tdata" (AXI4-Stream tdata),
              "s_tdata_bytes" (hex, little-endian)}
    python json_host_driver.py unpack DESIGN.json WORDS.json OUT.json
        WORDS: {"words": [int], "tdata": bool} (m__payload or m_axis_pred_tdata words)
        OUT: {"pred_raw" [[int]], "pred" [[float]], "decision" [int]}
"""

import json
import re
import sys

import numpy as np


def parse_format(text):
    """(width, frac_bits, signed, quant, overflow) of an ``ap_fixed<W,I,Q,O>`` / ``ap_ufixed`` string."""
    m = re.fullmatch(r"(ap_u?fixed)<(\d+),(-?\d+)(?:,(\w+))?(?:,(\w+))?>", text)
    kind, w, i, q, o = m.groups()
    return int(w), int(w) - int(i), kind == "ap_fixed", q or "TRN", o or "WRAP"


def to_raw(values, text):
    """Real values -> raw integers of the format ``text`` (the modes the presets use)."""
    w, f, signed, quant, overflow = parse_format(text)
    scaled = np.asarray(values, np.float64) * 2.0**f  # exact: a power-of-two scale
    if quant == "RND_CONV":
        raw = np.rint(scaled)  # round to nearest, ties to even
    elif quant == "TRN":
        raw = np.floor(scaled)
    else:
        raise SystemExit(f"rounding mode {quant} not handled by this driver")
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    if overflow == "SAT":
        raw = np.clip(raw, lo, hi)
    elif overflow == "WRAP":
        raw = (raw.astype(np.int64) - lo) % (1 << w) + lo
    else:
        raise SystemExit(f"overflow mode {overflow} not handled by this driver")
    return raw.astype(np.int64)


def pack(fields, values):
    """One payload integer from field name -> raw value (two's complement in each field's width)."""
    word = 0
    for name, v in values.items():
        e = fields[name]
        word |= (int(v) & ((1 << e["width"]) - 1)) << e["offset"]
    return word


def encode_y(raw, enc):
    """A raw ``y`` value of a sample kind -> the field's bits, as the field's ``encoding`` of that kind
    says: the value in its ``bits`` low bits, extended (sign or zero) to ``field_bits``."""
    raw = int(raw)
    lo, hi = (-(1 << (enc["bits"] - 1)), (1 << (enc["bits"] - 1)) - 1) if enc["extend"] == "sign" else (0, (1 << enc["bits"]) - 1)
    assert lo <= raw <= hi, f"{raw} outside {enc['format']}"
    low = raw & ((1 << enc["bits"]) - 1)
    if enc["extend"] == "sign" and low >> (enc["bits"] - 1):
        low |= ((1 << enc["field_bits"]) - 1) ^ ((1 << enc["bits"]) - 1)  # copies of the sign bit above
    return low


def field(word, e):
    v = (word >> e["offset"]) & ((1 << e["width"]) - 1)
    return v - (1 << e["width"]) if e["signed"] and v >> (e["width"] - 1) else v


def main(argv):
    command, design_path, in_path, out_path = argv
    info = json.load(open(design_path))
    data = json.load(open(in_path))
    n_in, n_out = info["spec"]["widths"][0], info["spec"]["widths"][-1]
    out = {}
    if command == "pack":
        s = info["payload"]["s"]
        kinds = [s["kind"]["values"][k] for k in data["kind"]]
        x_raw = np.stack([to_raw(np.asarray(data["x"])[:, i], s[f"x{i}"]["format"]) for i in range(n_in)], axis=1)
        y = np.asarray(data["y"])
        # each y field by the sample's kind: its encoding names the format, the bits and the extension
        kind_names = list(data["kind"])
        y_raw = np.zeros(y.shape, np.int64)
        for j in range(n_out):
            enc = s[f"y{j}"]["encoding"]
            for name in ("TARGET", "ERROR"):
                rows = np.asarray(kind_names) == name
                y_raw[rows, j] = to_raw(y[rows, j], enc[name]["format"])
        words = []
        for n, kind in enumerate(kinds):
            values = {f"x{i}": x_raw[n, i] for i in range(n_in)}
            values.update({f"y{j}": (encode_y(y_raw[n, j], s[f"y{j}"]["encoding"][kind_names[n]])
                                     if kind_names[n] != "PREDICT" else 0) for j in range(n_out)})
            values["kind"] = kind
            words.append(pack(s, values))
        bus = next(b for b, t in info["axis"]["tdata"].items() if t["stream"] == "s")
        t = info["axis"]["tdata"][bus]
        assert t["payload_width"] == info["ports"]["s__payload"]["width"] == t["padding"]["offset"]
        assert t["width"] % 8 == 0 and all(w < 1 << t["payload_width"] for w in words)
        out = {"x_raw": x_raw.tolist(), "y_raw": y_raw.tolist(), "kind": kinds, "s_words": words,
               # padding is zero; the payload sits at bit 0 of tdata, bytes little-endian
               "s_tdata": words, "s_tdata_bytes": [w.to_bytes(t["width"] // 8, "little").hex() for w in words]}
    elif command == "unpack":
        m = info["payload"]["m"]
        words = [int(w) for w in data["words"]]
        if data["tdata"]:
            bus = next(b for b, t in info["axis"]["tdata"].items() if t["stream"] == "m")
            t = info["axis"]["tdata"][bus]
            assert all(w >> t["padding"]["offset"] == 0 for w in words), "padding of an output must be 0"
        raw = [[field(w, m[f"pred{j}"]) for j in range(n_out)] for w in words]
        frac = [parse_format(m[f"pred{j}"]["format"])[1] for j in range(n_out)]
        out = {"pred_raw": raw, "pred": [[v * 2.0**-frac[j] for j, v in enumerate(r)] for r in raw],
               "decision": [field(w, m["decision"]) for w in words]}
    else:
        raise SystemExit(f"unknown command {command}")
    json.dump(out, open(out_path, "w"))
    assert "onchip" not in sys.modules and not any(k.startswith("onchip.") for k in sys.modules)


if __name__ == "__main__":
    main(sys.argv[1:])
