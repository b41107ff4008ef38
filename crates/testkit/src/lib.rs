//! squidbot-testkit
