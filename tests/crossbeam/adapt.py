"""Copies crossbeam-channel's test files from SRC to DST for a mode.

threads: unchanged (the `crossbeam-channel` they import is fibra's shim).
fibers, workers: `std::thread` and crossbeam-utils' `scope` imports point at
the `fibered` crate (fibra's fibers), std's Barrier at fibra's, and each
`#[test] fn name() {..}` becomes `fn name() { fibered::run(name_body) }`
plus `fn name_body() {..}`, so every test body runs in a fiber.
Usage: adapt.py SRC DST MODE
"""
import os
import re
import sys

src, dst, mode = sys.argv[1:4]
os.makedirs(dst, exist_ok=True)


def is_test(lines, i):
    k = i - 1
    while k >= 0:
        t = lines[k].strip()
        if t == "#[test]":
            return True
        if not (t.startswith("#[") or t.startswith("//")):
            return False
        k -= 1
    return False


for name in sorted(os.listdir(src)):
    if not name.endswith(".rs"):
        continue
    text = open(os.path.join(src, name)).read()
    if mode != "threads":
        text = re.sub(r"(?m)^(\s*)use std::thread;", r"\1use fibered::thread;", text)
        text = re.sub(r"(?m)^(\s*)use std::thread::JoinHandle;", r"\1use fibered::thread::JoinHandle;", text)
        text = text.replace("use crossbeam_utils::thread::scope;", "use fibered::scope;")
        text = re.sub(r"(?m)^(\s*)use std::sync::Barrier;", r"\1use fibra::sync::Barrier;", text)
        lines = text.split("\n")
        out = []
        for i, line in enumerate(lines):
            m = re.match(r"^(\s*)fn (\w+)\(\) \{$", line)
            if m and is_test(lines, i):
                indent, fname = m.groups()
                out.append(f"{indent}fn {fname}() {{ fibered::run({fname}_body) }}")
                out.append(f"{indent}fn {fname}_body() {{")
            else:
                out.append(line)
        text = "\n".join(out)
    open(os.path.join(dst, name), "w").write(text)
