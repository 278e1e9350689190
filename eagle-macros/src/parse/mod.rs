//! Reading what the user wrote outside a body: the attribute (`attr`) and the parameter
//! types (`params`). The bodies are read and turned into IR-building code by
//! [`crate::generate`].

pub(crate) mod attr;
pub(crate) mod params;
