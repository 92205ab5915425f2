//! Builds three copies of the second half of fibra's switch (and of its
//! trampoline) for the `floor` table: the file as shipped (symbols renamed
//! so they do not clash with the crate's), the same with the MXCSR / x87
//! control-word load taken out, to show what those words cost on this
//! machine, and one that never loads MXCSR, for the switch that stores it
//! and never loads it, the floor of any switch that keeps it. The first
//! halves, inline assembly in fibra, are copied in `src/floor.rs`.

use std::{env, fs, path::Path};

fn main() {
    let src = Path::new("../../asm/x86_64.S");
    println!("cargo:rerun-if-changed={}", src.display());
    let text = fs::read_to_string(src).expect("asm/x86_64.S");
    // Every symbol of the file, renamed (`fibra_0_1_switch_tail` becomes
    // `floor_full_switch_tail`, and so on).
    let full = text.replace("fibra_0_1_", "floor_full_");
    let mut no_fp = text.replace("fibra_0_1_", "floor_nofp_");
    for line in [
        "    fnstcw 4(%rsp)\n",
        "    movzwl 4(%rsp), %ecx\n",
        "    ldmxcsr 16(%rsp)\n",
        "    cmpw 20(%rsp), %cx\n",
        "    jne 4f\n",
    ] {
        assert!(
            no_fp.contains(line),
            "asm/x86_64.S changed: update build.rs ({line:?})"
        );
        no_fp = no_fp.replace(line, "");
    }
    // The floor of any switch that keeps MXCSR: it is stored (the dear
    // `stmxcsr`) and never loaded back, so nothing waits for it; the x87
    // word is kept as shipped.
    let ldmxcsr = "    ldmxcsr 16(%rsp)\n";
    assert!(
        full.contains(ldmxcsr),
        "asm/x86_64.S changed: update build.rs"
    );
    let store_only = full
        .replace("floor_full_", "floor_store_")
        .replace(ldmxcsr, "");
    let out = env::var("OUT_DIR").unwrap();
    fs::write(Path::new(&out).join("full.S"), full).unwrap();
    fs::write(Path::new(&out).join("nofp.S"), no_fp).unwrap();
    fs::write(Path::new(&out).join("store.S"), store_only).unwrap();
}
