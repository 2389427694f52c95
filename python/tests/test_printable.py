"""printable(): each character a terminal acts on or does not show reads as '?' (C0, DEL, C1,
line and paragraph separators, zero-width and bidirectional format characters, lone surrogates),
the same list as mhc's C++ printable (common/src/error.cpp), checked against Python's unicodedata."""
import sys
import unicodedata

from mhc_torch.number_grammar import printable


def test_every_control_format_and_separator_character_is_hidden():
    hidden = ("Cc", "Cf", "Zl", "Zp", "Cs")
    missed = [f"U+{c:04X}" for c in range(sys.maxunicode + 1)
              if unicodedata.category(chr(c)) in hidden and printable(chr(c)) != "?"]
    assert missed == []
    # more is hidden only where this Python's Unicode has no character yet (Cn: a newer Unicode's Cf)
    extra = [f"U+{c:04X}" for c in range(sys.maxunicode + 1)
             if c != ord("?") and printable(chr(c)) == "?" and unicodedata.category(chr(c)) not in hidden + ("Cn",)]
    assert extra == []


def test_names_stay_as_they_show():
    assert printable("a\u009b31mb.db") == "a?31mb.db"          # C1 CSI: an escape to 8-bit terminals
    assert printable("x\u202egpj.db") == "x?gpj.db"            # shown as "xbd.jpg" otherwise
    assert printable("k\udcff.db") == "k?.db"                  # a byte of no UTF-8, as os.fsdecode reads it
    assert printable("caf\u00e9 \u6a21\u578b \u00a0") == "caf\u00e9 \u6a21\u578b \u00a0"   # what shows, kept
