//! Tool specs from argument structs (shared with the other tool crates).

pub(crate) use squidbot_types::schema::spec_for;
