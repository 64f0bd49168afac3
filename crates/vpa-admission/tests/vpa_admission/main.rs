//! vpa-admission's integration tests as one binary: decoding properties and the TLS webhook.

mod decode_props;
mod tls;
