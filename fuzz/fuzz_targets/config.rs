//! Any text as circe.yaml: parse and the derived settings never panic.
#![no_main]

use circe::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(c) = Config::parse(text) {
        let _ = c.lease();
        let _ = c.durability();
    }
});
