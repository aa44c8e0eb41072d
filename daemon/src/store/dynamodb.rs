//! The DynamoDB store: records in a table shared by every host.
//!
//! `GetItem` with `ConsistentRead`; `PutItem` conditioned on `version = :v`,
//! or on `attribute_not_exists(#pk)` for a first write. A failed condition is
//! a conflict; anything else is an error, classified transient (throttling,
//! timeouts, network) or permanent (missing table, bad credentials).
//!
//! Credentials: `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (and
//! `AWS_SESSION_TOKEN`) from the environment; for a local endpoint
//! (DynamoDB Local or any DynamoDB-API server) without them, static dummy
//! credentials. Plain `http://` endpoints and `https://` (rustls) both work.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_credential_types::Credentials;
use aws_sdk_dynamodb::config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ReturnValuesOnConditionCheckFailure,
    ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;

use super::{PutOutcome, Record, Store, StoreError};

const NAME: &str = "dynamodb";

/// How often `table create` asks whether a new table is active.
const TABLE_WAIT_POLL: Duration = Duration::from_millis(500);
/// Polls before giving up on a table becoming active: one minute, well past
/// the seconds DynamoDB takes for an on-demand table.
const TABLE_WAIT_POLLS: u32 = 120;

/// Where the table is and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamoConfig {
    /// Table name.
    pub table: String,
    /// Partition-key attribute name (string type); default `pk`.
    pub hash_key: String,
    /// AWS region; falls back to `AWS_REGION` / `AWS_DEFAULT_REGION`, then
    /// `us-east-1` for local endpoints.
    pub region: Option<String>,
    /// Endpoint URL, e.g. `http://127.0.0.1:8000` for DynamoDB Local.
    pub endpoint: Option<String>,
    /// Longest a single request may take before it counts as a transient failure.
    pub request_timeout: Duration,
}

impl Default for DynamoConfig {
    fn default() -> Self {
        Self {
            table: "leasehold".into(),
            hash_key: "pk".into(),
            region: None,
            endpoint: None,
            request_timeout: Duration::from_secs(2),
        }
    }
}

/// A DynamoDB table as a [`Store`].
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    config: DynamoConfig,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl DynamoStore {
    /// Builds a client for `config`. Makes no request.
    ///
    /// # Errors
    /// A permanent [`StoreError`] when no region or no credentials can be found.
    pub fn connect(config: DynamoConfig) -> Result<Self, StoreError> {
        let local = config.endpoint.is_some();
        let region = config
            .region
            .clone()
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .or_else(|| local.then(|| "us-east-1".to_string()))
            .ok_or_else(|| {
                StoreError::permanent(NAME, "no AWS region: set store.region, AWS_REGION or AWS_DEFAULT_REGION")
            })?;
        let credentials = match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            (Some(id), Some(secret)) => Credentials::new(id, secret, env("AWS_SESSION_TOKEN"), None, "environment"),
            _ if local => Credentials::new("local", "local", None, None, "local-endpoint"),
            _ => {
                return Err(StoreError::permanent(
                    NAME,
                    "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials)",
                ))
            }
        };
        let plain_http = config.endpoint.as_deref().is_some_and(|e| e.starts_with("http://"));
        let http = if plain_http {
            aws_smithy_http_client::Builder::new().build_http()
        } else {
            aws_smithy_http_client::Builder::new()
                .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                    aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
                ))
                .build_https()
        };
        let timeouts = aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
            .connect_timeout(config.request_timeout.min(Duration::from_secs(1)))
            .operation_timeout(config.request_timeout)
            .build();
        let mut builder = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region))
            .credentials_provider(credentials)
            .http_client(http)
            .timeout_config(timeouts)
            // The CAS loop above retries with its own bounded, jittered backoff.
            .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled());
        if let Some(endpoint) = &config.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        Ok(Self { client: Client::from_conf(builder.build()), config })
    }

    /// The configuration the store was built with.
    pub fn config(&self) -> &DynamoConfig {
        &self.config
    }

    /// Creates the table (string partition key, on-demand billing) and turns
    /// on TTL on `expires_at`. Running it on an existing table is not an error.
    /// Returns a line per step for the operator.
    ///
    /// # Errors
    /// A [`StoreError`] saying what failed, e.g. the endpoint is unreachable.
    pub async fn create_table(&self) -> Result<Vec<String>, StoreError> {
        let c = &self.config;
        let mut steps = Vec::new();
        let attr = AttributeDefinition::builder()
            .attribute_name(&c.hash_key)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(|e| StoreError::permanent(NAME, e.to_string()))?;
        let key = KeySchemaElement::builder()
            .attribute_name(&c.hash_key)
            .key_type(KeyType::Hash)
            .build()
            .map_err(|e| StoreError::permanent(NAME, e.to_string()))?;
        let created = self
            .client
            .create_table()
            .table_name(&c.table)
            .attribute_definitions(attr)
            .key_schema(key)
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await;
        match created {
            Ok(_) => steps.push(format!("created table {} (partition key {} S, on-demand)", c.table, c.hash_key)),
            Err(e) if e.code() == Some("ResourceInUseException") => {
                steps.push(format!("table {} already exists", c.table))
            }
            Err(e) => return Err(self.classify("create table", e)),
        }
        for _ in 0..TABLE_WAIT_POLLS {
            let d = self.client.describe_table().table_name(&c.table).send().await;
            let status = d.map_err(|e| self.classify("describe table", e))?.table.and_then(|t| t.table_status);
            if status.as_ref().is_some_and(|s| s.as_str() == "ACTIVE") {
                break;
            }
            tokio::time::sleep(TABLE_WAIT_POLL).await;
        }
        let ttl = TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name("expires_at")
            .build()
            .map_err(|e| StoreError::permanent(NAME, e.to_string()))?;
        match self.client.update_time_to_live().table_name(&c.table).time_to_live_specification(ttl).send().await {
            Ok(_) => steps.push("enabled TTL on expires_at".into()),
            Err(e) if e.message().is_some_and(|m| m.contains("already enabled")) => {
                steps.push("TTL on expires_at already enabled".into())
            }
            Err(e) => return Err(self.classify("enable TTL", e)),
        }
        Ok(steps)
    }

    fn classify<E, R>(&self, what: &str, e: SdkError<E, R>) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        let where_ = self.config.endpoint.as_deref().unwrap_or("AWS");
        match &e {
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => StoreError::transient(
                NAME,
                format!("{what}: cannot reach DynamoDB at {where_}: {}", DisplayErrorContext(&e)),
            ),
            SdkError::ServiceError(_) | SdkError::ResponseError(_) => {
                let code = e.code().unwrap_or("unknown");
                let transient = matches!(
                    code,
                    "ProvisionedThroughputExceededException"
                        | "RequestLimitExceeded"
                        | "ThrottlingException"
                        | "InternalServerError"
                        | "ServiceUnavailable"
                        | "LimitExceededException"
                        | "TransactionConflictException"
                ) || matches!(e, SdkError::ResponseError(_));
                let message = format!("{what} on table {}: {code}: {}", self.config.table, e.message().unwrap_or(""));
                // A request DynamoDB refuses for its content (a key over 2048
                // bytes, an item over 400 KB) fails for this record only.
                let record = code == "ValidationException";
                StoreError { backend: NAME, transient, message, record }
            }
            _ => StoreError::permanent(NAME, format!("{what}: {}", DisplayErrorContext(&e))),
        }
    }
}

fn number(item: &HashMap<String, AttributeValue>, name: &str) -> Result<u64, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(n)) => n.parse().map_err(|_| bad(name, "is not a whole number")),
        Some(_) => Err(bad(name, "is not a number (N)")),
        None => Err(bad(name, "is missing")),
    }
}

fn bad(attr: &str, why: &str) -> StoreError {
    StoreError::record(NAME, format!("item attribute `{attr}` {why}"))
}

#[async_trait]
impl Store for DynamoStore {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.config.table)
            .key(&self.config.hash_key, AttributeValue::S(key.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.classify("GetItem", e))?;
        out.item.as_ref().map(record_of).transpose()
    }

    async fn put_if(
        &self,
        key: &str,
        record: &Record,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError> {
        self.put(key, record, expected_version, false).await.map(|(o, _)| o)
    }

    async fn put_if_or_current(
        &self,
        key: &str,
        record: &Record,
        expected_version: Option<u64>,
    ) -> Result<(PutOutcome, Option<Option<Record>>), StoreError> {
        self.put(key, record, expected_version, true).await
    }
}

/// A record from an item's attributes.
fn record_of(item: &HashMap<String, AttributeValue>) -> Result<Record, StoreError> {
    let state = match item.get("state") {
        Some(AttributeValue::S(s)) => s.clone(),
        _ => return Err(bad("state", "is missing or not a string (S)")),
    };
    Ok(Record {
        state,
        version: number(item, "version")?,
        expires_at_ms: number(item, "expires_at_ms")?,
        write_id: if item.contains_key("wid") { number(item, "wid")? } else { 0 },
    })
}

impl DynamoStore {
    /// The conditional `PutItem`; with `current`, a failed condition returns
    /// the item as it stands (`ALL_OLD`), so the caller needs no read.
    async fn put(
        &self,
        key: &str,
        record: &Record,
        expected_version: Option<u64>,
        current: bool,
    ) -> Result<(PutOutcome, Option<Option<Record>>), StoreError> {
        let put = self
            .client
            .put_item()
            .table_name(&self.config.table)
            .item(&self.config.hash_key, AttributeValue::S(key.to_owned()))
            .item("state", AttributeValue::S(record.state.clone()))
            .item("version", AttributeValue::N(record.version.to_string()))
            .item("expires_at", AttributeValue::N(record.expires_at_secs().to_string()))
            .item("expires_at_ms", AttributeValue::N(record.expires_at_ms.to_string()))
            .item("wid", AttributeValue::N(record.write_id.to_string()));
        let put = match expected_version {
            Some(v) => put
                .condition_expression("#v = :v")
                .expression_attribute_names("#v", "version")
                .expression_attribute_values(":v", AttributeValue::N(v.to_string())),
            None => put
                .condition_expression("attribute_not_exists(#pk)")
                .expression_attribute_names("#pk", &self.config.hash_key),
        };
        let put = if current {
            put.return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        } else {
            put
        };
        match put.send().await {
            Ok(_) => Ok((PutOutcome::Written, None)),
            Err(e) => match e.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                    // No item back: not returned, or gone; either way, read.
                    let found = if current { failed.item().map(record_of).transpose()?.map(Some) } else { None };
                    Ok((PutOutcome::Conflict, found))
                }
                _ => Err(self.classify("PutItem", e)),
            },
        }
    }
}
