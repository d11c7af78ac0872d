//! Generates the C header from the crate's extern functions and their doc comments.
//!
//! The header always goes to `$OUT_DIR/shale.h`, which the C example tests compile
//! against. The committed copy, `include/shale.h` (the one docs readers and users see), is
//! rewritten when `SHALE_CAPI_UPDATE_HEADER=1` is set; the test `committed_header_is_current`
//! fails while it differs, so a change to the ABI or its docs cannot land with a stale
//! header. A build never writes into the source tree otherwise (`cargo package` forbids it).

use std::path::PathBuf;

fn main() {
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SHALE_CAPI_UPDATE_HEADER");

    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("crates/capi/cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    bindings.write_to_file(out_dir.join("shale.h"));
    if std::env::var_os("SHALE_CAPI_UPDATE_HEADER").is_some_and(|v| v == "1") {
        bindings.write_to_file(crate_dir.join("include").join("shale.h"));
    }
}
