//! Integration tests of the matrix adapter.
