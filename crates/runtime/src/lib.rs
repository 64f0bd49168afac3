//! Shared I/O plumbing for every Plimsoll service.
