//! Horizontal scaling decisions: replica calculation, behavior, watermarks and limits.
