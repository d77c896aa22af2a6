//! Any bytes as a stored message and as a draft (CIRCE header block or YAML front matter):
//! parse must return a message or problems, never panic; a parsed message renders and
//! parses again.
#![no_main]

use circe::message::{Mode, parse_bytes, render};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for mode in [Mode::Stored, Mode::Draft] {
        if let Ok(m) = parse_bytes(data, mode) {
            let text = render(&m);
            let _ = parse_bytes(text.as_bytes(), mode);
        }
    }
});
