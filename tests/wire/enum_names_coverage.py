#!/usr/bin/python3
"""Every name table of the library is tied to its enum: for each wire_enum_names(E) overload in
the headers under INCLUDE_DIR, TEST_CPP (tests/wire/enum_names_test.cpp) must hold a
static_assert(wire::names_match<E...>()) or static_assert(wire::flag_names_match<E>()), E
qualified by the namespaces the overload is declared in (less pushwire::). Comments and string
literals are ignored on both sides, so a check that is commented out does not count.
Exit status: 0 when every enum has its check, 1 otherwise (each missing one named).
usage: enum_names_coverage.py INCLUDE_DIR TEST_CPP"""
import os
import re
import sys

include_dir, test_cpp = sys.argv[1:3]

LEXEME = re.compile(r'//[^\n]*|/\*.*?\*/|R"(?P<delim>[^(\s]*)\(.*?\)(?P=delim)"|"(?:\\.|[^"\\\n])*"|'
                    r"'(?:\\.|[^'\\\n])*'", re.S)


def code_only(text):
    """text with comments and string and character literals blanked (newlines kept)."""
    return LEXEME.sub(lambda m: "\n" * m.group(0).count("\n") + ('""' if m.group(0)[0] in "R\"'" else " "), text)


NAMESPACE = re.compile(r"\bnamespace\s+([A-Za-z_][\w:]*)?\s*\{")
OVERLOAD = re.compile(r"named_value\s*>\s*wire_enum_names\s*\(\s*([A-Za-z_]\w*)\s*\)")


def overloads(path):
    """(qualified enum, line) of each wire_enum_names overload defined in the file at path."""
    code = code_only(open(path, encoding="utf-8").read())
    return [("::".join(namespaces_at(code, m.start()) + [m.group(1)]), code.count("\n", 0, m.start()) + 1)
            for m in OVERLOAD.finditer(code)]


def namespaces_at(code, pos):
    """The named namespaces open at pos (anonymous ones left out), outermost first, less pushwire."""
    stack = []
    depth = 0
    i = 0
    while i < pos:
        m = NAMESPACE.match(code, i)
        if m and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            depth += 1
            stack.append((m.group(1).split("::") if m.group(1) else [], depth))
            i = m.end()
            continue
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            if stack and stack[-1][1] == depth:
                stack.pop()
            depth -= 1
        i += 1
    parts = [p for names, _ in stack for p in names]
    return parts[1:] if parts[:1] == ["pushwire"] else parts


test_code = code_only(open(test_cpp, encoding="utf-8").read())
checked = set()
for m in re.finditer(r"static_assert\s*\(\s*(?:pushwire::)?wire::(?:flag_)?names_match\s*<\s*(?:pushwire::)?([\w:]+)\s*[,>]",
                     test_code):
    checked.add(m.group(1))

headers = sorted(os.path.join(root, f) for root, _, files in os.walk(include_dir) for f in files if f.endswith(".hpp"))
missing = []
total = 0
for h in headers:
    for enum, line in overloads(h):
        total += 1
        if enum not in checked:
            missing.append(f"{os.path.relpath(h, include_dir)}:{line}: {enum}")
print(f"{total} wire_enum_names overloads in {len(headers)} headers; {len(checked)} enums checked in {os.path.basename(test_cpp)}")
if total < 40:
    print("FAIL: fewer overloads found than the library has: the scan is broken")
    sys.exit(1)
for m in missing:
    print(f"FAIL: no static_assert(wire::names_match<{m.split(': ')[-1]}...>()) for {m}")
sys.exit(1 if missing else 0)
