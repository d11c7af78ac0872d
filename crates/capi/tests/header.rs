//! The committed header, `include/shale.h`, is the one build.rs generates: readers of the
//! repository and users who copy it see the real ABI and its docs.

#[test]
fn committed_header_is_current() {
    let generated = std::fs::read_to_string(concat!(env!("OUT_DIR"), "/shale.h"))
        .expect("build.rs writes $OUT_DIR/shale.h");
    let committed_path = concat!(env!("CARGO_MANIFEST_DIR"), "/include/shale.h");
    let committed = std::fs::read_to_string(committed_path).unwrap_or_default();
    assert!(
        committed == generated,
        "{committed_path} differs from the header build.rs generates: refresh it with \
         `SHALE_CAPI_UPDATE_HEADER=1 cargo build -p shale-capi` and commit it"
    );
}

#[test]
fn header_opens_with_the_ownership_and_thread_rules() {
    let header = include_str!("../include/shale.h");
    let head = &header[..header.find("#ifndef SHALE_H").expect("an include guard")];
    for rule in ["Ownership", "shale_free", "shale_error_free", "shale_kvs_free_value", "Threads"] {
        assert!(head.contains(rule), "the header's opening says nothing of {rule}");
    }
}
