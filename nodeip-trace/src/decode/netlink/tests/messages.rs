//! Byte fixtures.
