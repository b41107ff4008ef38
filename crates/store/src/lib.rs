//! squidbot-store
