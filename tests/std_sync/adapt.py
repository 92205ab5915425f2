"""Writes std's own sync tests (library/std/tests/sync in the rust-src
component) as test targets that run against fibra::sync, for one mode.

    adapt.py SRC DST MODE        SRC: .../library/std/tests/sync
                                 DST: the suite crate's tests/ folder
                                 MODE: threads | fibers
    adapt.py --skips             prints the skip list, grouped by reason

For every file of SRC that keeps a test, DST/<file>.rs is a test target
(what std's lib.rs is to all of them: the helpers, and the macro that
makes poison/nonpoison twins) that includes the adapted file, written to
DST/std/<file>.rs. DST/../skipped.tsv lists what was left out
(file, test, reason), for run.sh's counts.

threads: the test bodies unchanged; their `use std::sync::...` of the types
    under test (Mutex, RwLock, Condvar, Barrier, OnceLock, LazyLock, guards,
    mpsc, oneshot, TryLockError, ...) point at fibra::sync; `Arc`, the
    atomics and std's threads stay std's.
fibers: as threads, and `std::thread` is `fibered::thread` (fibra::spawn,
    fibra::scope, fibra::sleep, ...: src/lib.rs of the suite, copied from
    fibered_lib.rs), and every test body runs in `fibra::run`: the
    "threads" a test spawns are fibers of the test's one thread.

`nonpoison_and_poison_unwrap_test!` makes only its `poison_` test here
(fibra has std's stable, poisoning API); its `nonpoison_` twin is counted
as skipped. Tests that need API fibra lacks are left out by name, each
with its reason, in SKIPS below; a name there that matches no test is an
error (std's tests changed: look again). No test is left out because it
fails.
"""
import os
import re
import sys

# ---------------------------------------------------------------------------
# What is skipped, and why. (file, test name as std's harness names it,
# reason); "*" skips the whole file.

NONPOISON = ("std::sync::nonpoison (unstable sync_nonpoison, nonpoison_mutex/"
             "rwlock/condvar): fibra has std's stable, poisoning API only")
MAPPED = ("mapped guards: MutexGuard::map, RwLock{Read,Write}Guard::map/"
          "filter_map, Mapped*Guard (unstable mapped_lock_guards): fibra has none")
ACCESSORS = ("Mutex/RwLock::get_cloned/set/replace (unstable lock_value_accessors): "
             "fibra has none")
DOWNGRADE = ("RwLockWriteGuard::downgrade (std: stable since 1.92; fibra's MSRV "
             "is 1.88): fibra's RwLockWriteGuard has none")
FORCE_MUT = ("LazyLock::force_mut (std: stable since 1.94, lazy_get): fibra's "
             "LazyLock has none")
CONST_DEFAULT = ("a `const` LazyLock from `<_>::default()` (std: unstable "
                 "const_default/const_trait_impl, `impl const Default`): fibra's "
                 "Default is not const (nor can be on stable)")
MPMC = ("std::sync::mpmc (unstable mpmc_channel): fibra::sync has no mpmc face "
        "(its MPMC channel is fibra::channel, run by tests/crossbeam)")
REENTRANT = "std::sync::ReentrantLock (unstable reentrant_lock): fibra has none"
SEND_TIMEOUT = ("SyncSender::send_timeout returning mpmc::SendTimeoutError (std: "
                "unstable, std_internals/mpmc_channel): fibra's SyncSender has none")
ONESHOT_DEADLINE = ("oneshot::Receiver::recv_deadline (std's unstable "
                    "oneshot_channel): fibra's oneshot has recv_timeout only")
ONESHOT_GIVE_BACK = ("std's unstable oneshot gives the receiver back in "
                     "TryRecvError::Empty(rx) / RecvTimeoutError::Timeout(rx); "
                     "fibra's oneshot uses mpsc's unit variants (Empty, Timeout)")
ONESHOT_SEND_ERROR = ("std's unstable oneshot::Sender::send fails with "
                      "SendError<T> (`.0`; Debug for any T, so `.unwrap()` "
                      "compiles for a T without Debug); fibra's fails with Err(T)")
UPSTREAM_IGNORED = "#[ignore] in std itself: \"Inherently flaky and has caused several CI failures\""
MAY_DANGLE = ("needs `unsafe impl<#[may_dangle] T> Drop for OnceLock<T>` (unstable "
              "dropck_eyepatch), which lets a OnceLock<&'a T> be dropped after its "
              "referent; fibra's OnceLock has a plain Drop, so the test does not "
              "compile (E0597), as with any stable-Rust type with a Drop impl")

SKIPS = [
    # mutex.rs
    ("mutex", "poison_test_get_cloned", ACCESSORS),
    ("mutex", "poison_test_set", ACCESSORS),
    ("mutex", "poison_test_set_drop", ACCESSORS),
    ("mutex", "poison_test_replace", ACCESSORS),
    ("mutex", "test_get_cloned_poison", ACCESSORS),
    ("mutex", "test_set_poison", ACCESSORS),
    ("mutex", "test_replace_poison", ACCESSORS),
    ("mutex", "poison_test_mapping_mapped_guard", MAPPED),
    ("mutex", "test_mutex_arc_poison_mapped", MAPPED),
    ("mutex", "panic_while_mapping_unlocked_poison", MAPPED),
    ("mutex", "test_mutex_with_mut", NONPOISON),
    # rwlock.rs
    ("rwlock", "poison_test_get_cloned", ACCESSORS),
    ("rwlock", "poison_test_set", ACCESSORS),
    ("rwlock", "poison_test_replace", ACCESSORS),
    ("rwlock", "test_get_cloned_poison", ACCESSORS),
    ("rwlock", "test_set_poison", ACCESSORS),
    ("rwlock", "test_replace_poison", ACCESSORS),
    ("rwlock", "poison_test_mapped_read_guard_covariance", MAPPED),
    ("rwlock", "poison_test_mapping_mapped_guard", MAPPED),
    ("rwlock", "poison_test_rwlock_try_write", MAPPED),
    ("rwlock", "test_rw_arc_poison_mapped_w_r", MAPPED),
    ("rwlock", "test_rw_arc_poison_mapped_w_w", MAPPED),
    ("rwlock", "test_rw_arc_no_poison_mapped_r_r", MAPPED),
    ("rwlock", "test_rw_arc_no_poison_mapped_r_w", MAPPED),
    ("rwlock", "panic_while_mapping_read_unlocked_no_poison", MAPPED),
    ("rwlock", "panic_while_mapping_write_unlocked_poison", MAPPED),
    ("rwlock", "poison_test_downgrade_basic", DOWNGRADE),
    ("rwlock", "poison_test_downgrade_observe", DOWNGRADE),
    ("rwlock", "poison_test_downgrade_atomic", DOWNGRADE),
    ("rwlock", "nonpoison_test_rwlock_try_write", NONPOISON),
    ("rwlock", "test_rwlock_with", NONPOISON),
    ("rwlock", "test_rwlock_with_mut", NONPOISON),
    # condvar.rs: its nonpoison_* tests are written out by hand, not by the macro
    ("condvar", "nonpoison_notify_one", NONPOISON),
    ("condvar", "nonpoison_notify_all", NONPOISON),
    ("condvar", "nonpoison_test_mutex_arc_condvar", NONPOISON),
    ("condvar", "nonpoison_wait_while", NONPOISON),
    ("condvar", "nonpoison_wait_timeout_wait", NONPOISON),
    ("condvar", "nonpoison_wait_timeout_while_wait", NONPOISON),
    ("condvar", "nonpoison_wait_timeout_while_instant_satisfy", NONPOISON),
    ("condvar", "nonpoison_wait_timeout_while_wake", NONPOISON),
    ("condvar", "nonpoison_wait_timeout_wake", NONPOISON),
    ("condvar", "nonpoison_timeout_nanoseconds", NONPOISON),
    # lazy_lock.rs
    ("lazy_lock", "const_lazy_default", CONST_DEFAULT),
    ("lazy_lock", "lazy_force_mut", FORCE_MUT),
    ("lazy_lock", "lazy_lock_deref_mut_panic", FORCE_MUT),
    # once_lock.rs
    ("once_lock", "dropck", MAY_DANGLE),
    # mpsc_sync.rs
    ("mpsc_sync", "send_timeout", SEND_TIMEOUT),
    # oneshot.rs (std's unstable oneshot; the tests that fit fibra's shape run)
    ("oneshot", "send_never_deadline", ONESHOT_DEADLINE),
    ("oneshot", "recv_no_time", ONESHOT_DEADLINE),
    ("oneshot", "recv_deadline_passed", ONESHOT_DEADLINE),
    ("oneshot", "try_recv_empty", ONESHOT_GIVE_BACK),
    ("oneshot", "try_recv_then_drop_receiver", ONESHOT_GIVE_BACK),
    ("oneshot", "recv_time_passed", ONESHOT_GIVE_BACK),
    ("oneshot", "send_error", ONESHOT_SEND_ERROR),
    ("oneshot", "send_error_drops_message_correctly_on_extract", ONESHOT_SEND_ERROR),
    ("oneshot", "message_in_channel_dropped_on_receiver_drop", ONESHOT_SEND_ERROR),
    ("oneshot", "recv_timeout_before_send", UPSTREAM_IGNORED),
    # whole files
    ("mpmc", "*", MPMC),
    ("reentrant_lock", "*", REENTRANT),
]

# The names `use std::sync::...` may bring in, by where they come from here.
FIBRA = {"Mutex", "MutexGuard", "RwLock", "RwLockReadGuard", "RwLockWriteGuard",
         "Condvar", "WaitTimeoutResult", "Barrier", "BarrierWaitResult", "OnceLock", "Once", "OnceState",
         "LazyLock", "LockResult", "PoisonError", "TryLockError", "TryLockResult",
         "mpsc", "oneshot"}
STD = {"Arc", "Weak", "atomic"}
# Only the skipped tests use these: their imports go, so that a test kept by
# mistake that uses one does not build (rather than test std's).
GONE = {"MappedMutexGuard", "MappedRwLockReadGuard", "MappedRwLockWriteGuard",
        "mpmc", "nonpoison", "ReentrantLock", "ReentrantLockGuard"}

MACRO = "nonpoison_and_poison_unwrap_test"


# ---------------------------------------------------------------------------
# A little Rust reading: where strings and comments are, and where items end.

def mask(text):
    """`text` with comments and string/char literals blanked (newlines
    kept): same length, so positions agree, and braces in strings do not
    count."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            j = text.index('"' + hashes, i + len(hashes) + 2) + 1 + len(hashes)
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                blank(i, i + m.end())
                i += m.end()
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return "".join(out)


def matching(code, start):
    """Index just past the bracket that closes the one at code[start]."""
    depth = 0
    for k in range(start, len(code)):
        if code[k] in "([{":
            depth += 1
        elif code[k] in ")]}":
            depth -= 1
            if depth == 0:
                return k + 1
    raise ValueError("unbalanced")


def items(text):
    """The tests of a file at top level: (start, end, kind, name, header),
    start including the attributes and comments right above; kind "fn" (a
    #[test] fn, header its `fn name() {` span) or "macro" (an invocation of
    MACRO; name the `name:` it gives)."""
    code = mask(text)
    found = []
    pos = 0
    item = re.compile(r"(?m)^(fn (\w+)\s*\(|" + MACRO + r"!\s*\()")
    while True:
        m = item.search(code, pos)
        if not m:
            return found
        # Only at depth 0 (top level).
        prefix = code[:m.start()]
        if sum(prefix.count(c) for c in "([{") != sum(prefix.count(c) for c in ")]}"):
            pos = m.end()
            continue
        # The attributes and comments right above.
        start = m.start()
        lines_above = text[:start].split("\n")[:-1]
        attrs = []
        while lines_above and (lines_above[-1].strip().startswith("#[") or lines_above[-1].strip().startswith("//")):
            attrs.insert(0, lines_above.pop())
        start -= sum(len(line) + 1 for line in attrs)
        if m.group(2):  # a fn
            body = code.index("{", m.end())
            end = matching(code, body)
            pos = end
            if not any(a.strip() == "#[test]" for a in attrs):
                continue
            found.append((start, end, "fn", m.group(2), (m.start(), body + 1)))
        else:
            end = matching(code, m.end() - 1)
            if code[end] == ";":
                end += 1
            name = re.search(r"name:\s*(\w+)", code[m.end():end]).group(1)
            found.append((start, end, "macro", name, None))
            pos = end


def tests_of(text):
    """Every test name std's harness would list for this file."""
    names = []
    for _, _, kind, name, _ in items(text):
        names += [f"nonpoison_{name}", f"poison_{name}"] if kind == "macro" else [name]
    return names


# ---------------------------------------------------------------------------
# The rewriting.

def point_uses(text, fname):
    """`use std::sync::...;` of the types under test -> fibra::sync."""
    def head(path):
        return re.match(r"\w+", path.strip()).group(0)

    def one(m):
        indent, body = m.group(1), " ".join(m.group(2).split())
        if body.startswith("{"):
            names = [p.strip() for p in body.strip("{}").split(",") if p.strip()]
            out = []
            for where, keep in (("fibra::sync", FIBRA), ("std::sync", STD)):
                mine = [p for p in names if head(p) in keep]
                if len(mine) == 1:
                    out.append(f"{indent}use {where}::{mine[0]};")
                elif mine:
                    out.append(f"{indent}use {where}::{{{', '.join(mine)}}};")
            unknown = [p for p in names if head(p) not in FIBRA | STD | GONE]
            if unknown:
                sys.exit(f"adapt.py: {fname}: std::sync::{unknown} is not sorted out")
            return "\n".join(out)
        h = head(body)
        if h == "poison":  # std::sync::poison::X is std::sync::X
            return f"{indent}use fibra::sync::{body[len('poison::'):]};"
        if h in FIBRA:
            return f"{indent}use fibra::sync::{body};"
        if h in STD:
            return m.group(0)
        if h in GONE:
            return ""
        sys.exit(f"adapt.py: {fname}: std::sync::{body} is not sorted out")

    text = re.sub(r"(?m)^([ \t]*)use std::sync::([^;]*);", one, text)
    left = re.findall(r"std::sync::(?:poison|nonpoison|mpmc|mpsc|oneshot|Mutex|RwLock|"
                      r"Condvar|Barrier|Once|LazyLock|Mapped|Reentrant)\w*", mask(text))
    if left:
        sys.exit(f"adapt.py: {fname}: still std's: {sorted(set(left))}")
    return text


def point_thread(text, fname):
    """fibers: std's `thread` -> fibered::thread (fibra's fibers)."""
    def one(m):
        names = [p.strip() for p in m.group(1).split(",")]
        rest = [p for p in names if p != "thread"]
        out = "use fibered::thread;"
        if len(rest) == 1:
            out = f"use std::{rest[0]};\n" + out
        elif rest:
            out = f"use std::{{{', '.join(rest)}}};\n" + out
        return out

    text = re.sub(r"(?m)^use std::thread;", "use fibered::thread;", text)
    text = re.sub(r"(?m)^use std::\{([^}]*\bthread\b[^}]*)\};", one, text)
    # Only once_lock.rs's `std::thread::yield_now()` under cfg(sgx) may stay.
    for m in re.finditer(r"std::thread\b", mask(text)):
        before = text[:m.start()].rstrip().split("\n")[-1].strip()
        if before != '#[cfg(target_env = "sgx")]':
            sys.exit(f"adapt.py: {fname}: a std::thread left std's")
    return text


def adapt(fname, text, mode, skip):
    """The file with the skipped tests taken out and the rest pointed at
    fibra; returns (text, kept test names)."""
    kept = []
    out, last = [], 0
    for start, end, kind, name, header in items(text):
        harness_name = f"poison_{name}" if kind == "macro" else name
        if harness_name in skip:
            out.append(text[last:start].rstrip("\n") + "\n")
            last = end
            skip.remove(harness_name)
            continue
        kept.append(harness_name)
        if kind == "fn" and mode == "fibers":
            a, b = header
            if not re.fullmatch(r"fn \w+\(\)\s*\{", text[a:b]):
                sys.exit(f"adapt.py: {fname}: test {name} has an unexpected signature")
            out.append(text[last:a])
            out.append(f"fn {name}() {{ fibered::run({name}_body) }}\nfn {name}_body() {{")
            last = b
    out.append(text[last:])
    if skip:
        sys.exit(f"adapt.py: {fname}: skip list names no such test: {sorted(skip)}")
    text = point_uses("".join(out), fname)
    if mode == "fibers":
        text = point_thread(text, fname)
    return text, kept


ROOT = """\
//! std's library/std/tests/sync/{name}.rs (rust-src of {toolchain}) against
//! fibra::sync, {mode} mode: written by tests/std_sync/adapt.py; the
//! root of one test target, as std's tests/sync/lib.rs is for all of them.
#![feature(macro_metavar_expr_concat)] // `${{concat}}` in the macro below, as std's
#![allow(dead_code, unused_imports, unused_macros, unused_mut, unused_variables)]

#[path = "std/{name}.rs"]
mod {name};
{common}
#[track_caller]
fn result_unwrap<T, E: std::fmt::Debug>(x: Result<T, E>) -> T {{
    x.unwrap()
}}

/// std's macro makes a `nonpoison_` and a `poison_` test of one body, the
/// one with `std::sync::nonpoison` as `locks`, the other with
/// `std::sync::poison`. fibra has the poisoning API only: here it makes
/// the `poison_` test, with fibra::sync as `locks`.
macro_rules! nonpoison_and_poison_unwrap_test {{
    (
        name: $name:ident,
        test_body: {{$($test_body:tt)*}}
    ) => {{
{expansion}
    }}
}}
use nonpoison_and_poison_unwrap_test;
"""

EXPANSION = {
    "threads": """\
        #[test]
        fn ${concat(poison_, $name)}() {
            #[allow(unused_imports)]
            use super::result_unwrap as maybe_unwrap;
            use ::fibra::sync as locks;

            $($test_body)*
        }""",
    "fibers": """\
        #[test]
        fn ${concat(poison_, $name)}() {
            fibered::run(${concat(poison_, $name, _body)})
        }

        fn ${concat(poison_, $name, _body)}() {
            #[allow(unused_imports)]
            use super::result_unwrap as maybe_unwrap;
            use ::fibra::sync as locks;

            $($test_body)*
        }""",
}


def print_skips():
    by_reason = {}
    for f, t, why in SKIPS:
        by_reason.setdefault(why, []).append(f"{f}::{t}")
    for why, names in by_reason.items():
        print(f"{why}\n    " + "\n    ".join(names))
    print(f"{NONPOISON}\n    every nonpoison_ twin made by {MACRO}!")


def main():
    if sys.argv[1:] == ["--skips"]:
        print_skips()
        return
    src, dst, mode = sys.argv[1:4]
    if mode not in EXPANSION:
        sys.exit(f"adapt.py: no mode {mode}")
    toolchain = os.environ.get("STD_RUSTC", "nightly")
    os.makedirs(os.path.join(dst, "std"), exist_ok=True)
    skipped, kept_all = [], []
    files = sorted(f[:-3] for f in os.listdir(src) if f.endswith(".rs") and f != "lib.rs")
    listed = {f for f, _, _ in SKIPS}
    if listed - set(files):
        sys.exit(f"adapt.py: skip list names no such file: {sorted(listed - set(files))}")
    for name in files:
        text = open(os.path.join(src, f"{name}.rs")).read()
        whole = [why for f, t, why in SKIPS if f == name and t == "*"]
        if whole:
            skipped += [(name, t, whole[0]) for t in tests_of(text)]
            continue
        skip = {t: why for f, t, why in SKIPS if f == name}
        for _, _, kind, test, _ in items(text):
            if kind == "macro":
                skipped.append((name, f"nonpoison_{test}", NONPOISON))
        skipped += [(name, t, why) for t, why in skip.items()]
        text, kept = adapt(name, text, mode, set(skip))
        kept_all += [(name, t) for t in kept]
        open(os.path.join(dst, "std", f"{name}.rs"), "w").write(text)
        common = ""
        if "common::" in text:
            common = '\n#[path = "std/common.rs"]\nmod common;\n'
        root = ROOT.format(name=name, mode=mode, toolchain=toolchain, common=common,
                           expansion=EXPANSION[mode])
        open(os.path.join(dst, f"{name}.rs"), "w").write(root)
    common_src = os.path.join(src, "..", "common", "mod.rs")
    open(os.path.join(dst, "std", "common.rs"), "w").write(open(common_src).read())
    with open(os.path.join(dst, "..", "skipped.tsv"), "w") as out:
        for f, t, why in skipped:
            out.write(f"{f}\t{f}::{t}\t{why}\n")
    with open(os.path.join(dst, "..", "kept.tsv"), "w") as out:
        for f, t in kept_all:
            out.write(f"{f}\t{f}::{t}\n")


main()
