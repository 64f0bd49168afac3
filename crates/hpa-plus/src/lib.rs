//! The hpa-plus service.
