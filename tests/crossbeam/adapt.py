"""Copies crossbeam-channel's test files from SRC to DST for a mode.

threads: unchanged (the `crossbeam-channel` they import is fibra's shim).
fibers, workers: `std::thread` and crossbeam-utils' `scope` imports point at
the `fibered` crate (fibra's fibers), std's Barrier at fibra's, and each
`#[test] fn name() {..}` becomes `fn name() { fibered::run(name_body) }`
plus `fn name_body() {..}`, so every test body runs in a fiber.

mpsc.rs (std's own mpsc tests, as crossbeam copied them onto its channels
through a small wrapper) is also written a second time, as std_mpsc.rs,
with the wrapper taken out and fibra::sync::mpsc's faces in its place, and
its `select!` made with fibra's (an mpsc receiver is a `recv` arm): std's
tests against std's API on fibra's one channel core, in every mode.
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


def std_faced(text):
    """mpsc.rs on fibra::sync::mpsc instead of its wrapper of crossbeam's."""
    start = text.index("use crossbeam_channel as cc;")
    end = text.index("macro_rules! select")
    faces = ("#[allow(unused_imports)]\n"
             "use fibra::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};\n\n")
    text = text[:start] + faces + text[end:]
    text = text.replace("cc::crossbeam_channel_internal! {", "fibra::select! {")
    text = text.replace("$meth(($rx).inner) -> res", "$meth($rx) -> res")
    if "fibra::select!" not in text or ".inner" in text:
        sys.exit("adapt.py: mpsc.rs's wrapper is not as expected")
    return "//! std's mpsc tests on fibra::sync::mpsc (tests/crossbeam/adapt.py).\n" + text


files = []
for name in sorted(os.listdir(src)):
    if not name.endswith(".rs"):
        continue
    text = open(os.path.join(src, name)).read()
    files.append((name, text))
    if name == "mpsc.rs":
        files.append(("std_mpsc.rs", std_faced(text)))

for name, text in files:
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
