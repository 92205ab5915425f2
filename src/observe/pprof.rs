//! The protobuf encoding of pprof's `profile.proto`, as `go tool pprof`
//! reads it: only the messages and fields a CPU profile by fiber needs.
//! Written by hand (a varint and a length prefix are all protobuf's wire
//! format asks for here) rather than with a code generator and a crate.

use std::collections::HashMap;

/// A message being encoded: fields appended in any order (protobuf allows
/// it; pprof's reader takes them so).
#[derive(Default)]
pub(crate) struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }

    /// A varint field (`int64`, `uint64`, `bool`); zero is left out, as
    /// proto3 does.
    pub(crate) fn int(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
    }

    /// A length-delimited field: bytes, a string, or a nested message.
    pub(crate) fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    pub(crate) fn message(&mut self, field: u32, m: Message) {
        self.bytes(field, &m.0);
    }

    /// A repeated varint field, packed (proto3's default encoding).
    pub(crate) fn packed(&mut self, field: u32, values: impl IntoIterator<Item = u64>) {
        let mut inner = Message::default();
        for v in values {
            inner.varint(v);
        }
        self.bytes(field, &inner.0);
    }

    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

/// `Profile.string_table`: every string once, `""` first, referred to by
/// index.
#[derive(Default)]
pub(crate) struct Strings {
    list: Vec<String>,
    index: HashMap<String, u64>,
}

impl Strings {
    pub(crate) fn new() -> Strings {
        let mut s = Strings::default();
        s.id("");
        s
    }

    pub(crate) fn id(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.list.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }

    pub(crate) fn into_list(self) -> Vec<String> {
        self.list
    }
}

/// `ValueType { type, unit }`.
pub(crate) fn value_type(strings: &mut Strings, kind: &str, unit: &str) -> Message {
    let mut m = Message::default();
    m.int(1, strings.id(kind));
    m.int(2, strings.id(unit));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_are_encoded_as_protobuf_does() {
        let mut m = Message::default();
        m.int(1, 150); // the protobuf docs' example: 08 96 01
        m.int(2, 0); // left out
        m.bytes(2, b"testing");
        m.packed(4, [3, 270]);
        assert_eq!(
            m.into_bytes(),
            [
                0x08, 0x96, 0x01, 0x12, 7, b't', b'e', b's', b't', b'i', b'n', b'g', 0x22, 3, 3,
                0x8e, 0x02
            ]
        );
        let mut s = Strings::new();
        assert_eq!((s.id("a"), s.id("b"), s.id("a")), (1, 2, 1));
        assert_eq!(s.into_list(), ["", "a", "b"]);
    }
}
