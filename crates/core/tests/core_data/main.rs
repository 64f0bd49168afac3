//! core's integration tests as one binary: the admission fixture and the stored state upstream wrote.

mod admission_fixture;
mod stored_state;
