//! The squidbot terminal client: a pure [`app::App`] state machine, its ratatui
//! [`render::render`], and the thin IO around them ([`terminal::run`]) over a
//! [`transport::Transport`], the gateway's WebSocket protocol ([`gateway`]) or an agent
//! the binary runs in process.

pub mod app;
pub mod editor;
pub mod gateway;
mod highlight;
mod markdown;
pub mod paths;
pub mod render;
pub mod terminal;
pub mod theme;
pub mod transport;
mod wrap;

pub use app::Options;
pub use gateway::{FrameSocket, GatewayTransport, SocketError};
pub use terminal::{TuiError, run};
pub use theme::ThemeName;
pub use transport::{Event, EventSink, HistoryMessage, Mode, Request, Role, SessionSummary, Transport, Worker};
