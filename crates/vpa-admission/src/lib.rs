//! The vpa-admission service.
