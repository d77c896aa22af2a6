//! Any text as `.status`, `.owner` and `.checks`: never a panic; what parses renders and
//! parses back to the same record.
#![no_main]

use circe::task::record::{OwnerRecord, StatusRecord, parse_checks};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(r) = StatusRecord::parse("T1", text) {
        let again = StatusRecord::parse("T1", &r.render()).expect("a rendered .status parses");
        assert_eq!(again.render(), r.render());
    }
    if let Some(o) = OwnerRecord::parse(text) {
        let again = OwnerRecord::parse(&o.render()).expect("a rendered .owner parses");
        assert_eq!(again.render(), o.render());
    }
    let _ = parse_checks("T1", text);
});
