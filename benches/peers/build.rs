//! Builds two copies of fibra's switch routine for the `floor` table: the
//! file as shipped (symbols renamed so they do not clash with the crate's),
//! and the same routine with the MXCSR / x87 control-word save and compare
//! taken out, to show what those words cost on this machine.

use std::{env, fs, path::Path};

fn main() {
    let src = Path::new("../../asm/x86_64.S");
    println!("cargo:rerun-if-changed={}", src.display());
    let text = fs::read_to_string(src).expect("asm/x86_64.S");
    // Every symbol of the file, renamed (`fibra_0_1_switch` becomes
    // `floor_full_switch`, and so on).
    let full = text.replace("fibra_0_1_", "floor_full_");
    let mut no_fp = text.replace("fibra_0_1_", "floor_nofp_");
    for line in [
        "    stmxcsr (%rsp)\n",
        "    fnstcw 4(%rsp)\n",
        "    movl 48(%rsp), %eax\n",
        "    movzwl 52(%rsp), %ecx\n",
        "    xorl 48(%rsp), %eax\n",
        "    testl $0xffc0, %eax\n",
        "    jnz 2f\n",
        "    cmpw 52(%rsp), %cx\n",
        "    jne 4f\n",
    ] {
        assert!(
            no_fp.contains(line),
            "asm/x86_64.S changed: update build.rs ({line:?})"
        );
        no_fp = no_fp.replace(line, "");
    }
    let out = env::var("OUT_DIR").unwrap();
    fs::write(Path::new(&out).join("full.S"), full).unwrap();
    fs::write(Path::new(&out).join("nofp.S"), no_fp).unwrap();
}
