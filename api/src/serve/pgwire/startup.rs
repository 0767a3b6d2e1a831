//! Start-up: the client's password is an API token (its user name is free), checked like the
//! HTTP bearer token; the connection then gets a session that sees what the token may see.

use std::fmt::Debug;

use async_trait::async_trait;
use datafusion_postgres::pgwire;
use futures::{Sink, SinkExt};
use pgwire::api::auth::{
    DefaultServerParameterProvider, LoginInfo, StartupHandler, finish_authentication,
    protocol_negotiation, save_startup_parameters_to_metadata,
};
use pgwire::api::{ClientInfo, PgWireConnectionState};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::startup::Authentication;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use super::query::Session;
use super::{Connection, pg_error};
use crate::serve::auth::Permission;

#[async_trait]
impl StartupHandler for Connection {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(startup) => {
                protocol_negotiation(client, &startup).await?;
                save_startup_parameters_to_metadata(client, &startup);
                client.set_state(PgWireConnectionState::AuthenticationInProgress);
                client
                    .send(PgWireBackendMessage::Authentication(
                        Authentication::CleartextPassword,
                    ))
                    .await?;
            }
            PgWireFrontendMessage::PasswordMessageFamily(password) => {
                let token = password.into_password()?.password;
                let user = LoginInfo::from_client_info(client)
                    .user()
                    .unwrap_or_default()
                    .to_string();
                let token = token.trim();
                let session = self.open_session(token, user).await?;
                // Start-up happens once per connection: the cells are empty.
                let _ = self.session.set(session);
                let _ = self.token.set(token.to_string());
                finish_authentication(client, &server_parameters()).await?;
            }
            _ => {}
        }
        Ok(())
    }
}

impl Connection {
    /// The session of a valid token that may query; 28P01 for any other password.
    async fn open_session(&self, token: &str, user: String) -> PgWireResult<Session> {
        let principal = self
            .state
            .tokens
            .authenticate(self.state.lake.catalog(), token)
            .await
            .map_err(pg_error)?
            .ok_or(PgWireError::InvalidPassword(user))?;
        principal
            .require(Permission::Read, "queries")
            .map_err(pg_error)?;
        tracing::debug!(token = %principal.token_id, "postgres connection authenticated");
        let ctx = self.state.session(&principal).map_err(pg_error)?;
        let session = Session::new(ctx).map_err(pg_error)?;
        super::postgres::register_catalog_functions(&session.ctx)
            .await
            .map_err(|error| pg_error(error.into()))?;
        Ok(session)
    }
}

/// What the server says of itself after start-up: an ordinary user whose transactions only read.
fn server_parameters() -> DefaultServerParameterProvider {
    let mut parameters = DefaultServerParameterProvider::default();
    parameters.server_version = super::postgres::SERVER_VERSION.to_string();
    parameters.is_superuser = false;
    parameters.default_transaction_read_only = true;
    parameters
}
