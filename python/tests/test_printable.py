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


def test_long_words_are_capped_as_mhc_caps_them():
    """common/src/error.cpp's capped_words: a word past 1,024 bytes is its first 60 and its length,
    the quotes and colon around it kept; a file name as the user wrote it stays whole."""
    from mhc_torch.number_grammar import capped_words, message_line

    name = "d" * 150 + "/t.db"
    assert capped_words(f"{name}: already exists") == f"{name}: already exists"
    deep = ("d" * 210 + "/") * 5 + "t.db"   # 1,059 bytes
    assert capped_words(f"{deep}: already exists") == "d" * 60 + "...(1059 bytes): already exists"
    assert capped_words(f"--steps: '{'x' * 120000}': no") == "--steps: '" + "x" * 60 + "...(120000 bytes)': no"
    assert capped_words("y" * 1024 + " z") == "y" * 1024 + " z"
    assert capped_words("y" * 1024 + ": no such file") == "y" * 1024 + ": no such file"   # the colon is not the name's
    assert capped_words("a  b " + "y" * 1030) == "a  b " + "y" * 60 + "...(1030 bytes)"   # an empty word kept
    assert capped_words("\u00e9" * 520) == "\u00e9" * 30 + "...(1040 bytes)"   # bytes counted, not characters
    assert message_line(f"mhc-torch: {deep} is a link\n") == "mhc-torch: " + "d" * 60 + "...(1059 bytes) is a link?"


def test_long_names_with_spaces_are_capped_between_colons():
    """A name past 1,024 bytes with spaces in it (folders named "my runs"): no word of it is long,
    so word by word it was said whole, a line of 1,079 bytes; a path between two ": " is
    capped as a word is, the reason after it kept (common/src/error.cpp holds the same rule)."""
    from mhc_torch.number_grammar import capped_words

    spaced = ("my runs " + "r" * 200 + "/") * 5 + "t.db"   # 5 x 209 + 4 = 1,049 bytes
    assert capped_words(f"mhc-torch: {spaced}: already exists") == \
        f"mhc-torch: {spaced[:60]}...(1049 bytes): already exists"
    assert capped_words(f"mhc-torch: '{spaced}': no") == f"mhc-torch: '{spaced[:60]}...(1049 bytes)': no"
    # a path of 1,024 bytes with spaces stays whole, as a word of 1,024 does; a sentence is no path
    whole = "a/" * 512
    assert capped_words(f"x: {whole[:-1]} : y") == f"x: {whole[:-1]} : y"
    assert capped_words(f"x: {'b ' * 600}: y") == f"x: {'b ' * 600}: y"
    # a long word inside is capped first: the part is short after it and kept
    assert capped_words("mhc: " + "d" * 1030 + " is a link") == "mhc: " + "d" * 60 + "...(1030 bytes) is a link"
