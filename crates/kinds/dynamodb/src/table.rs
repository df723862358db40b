//! The campaign's table: created before the first cell as the spec says
//! (hash key, the group index, a stream, billing), waited on until it and
//! its index are ACTIVE, and deleted at teardown unless kept. A definition
//! the server refuses is an error with the server's own words.

use std::time::Duration;

use anyhow::Context;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, IndexStatus, KeySchemaElement, KeyType,
    Projection as SdkProjection, ProjectionType, ProvisionedThroughput, ScalarAttributeType, StreamSpecification,
    StreamViewType, TableStatus,
};
use aws_sdk_dynamodb::Client;

use super::options::{BillingSpec, Projection, TableSpec};

fn key(name: &str, kind: KeyType) -> anyhow::Result<KeySchemaElement> {
    Ok(KeySchemaElement::builder().attribute_name(name).key_type(kind).build()?)
}

fn string_attribute(name: &str) -> anyhow::Result<AttributeDefinition> {
    Ok(AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build()?)
}

fn throughput(billing: &BillingSpec) -> anyhow::Result<Option<ProvisionedThroughput>> {
    Ok(match billing {
        BillingSpec::PayPerRequest => None,
        BillingSpec::Provisioned { read, write } => Some(
            ProvisionedThroughput::builder()
                .read_capacity_units(i64::from(*read))
                .write_capacity_units(i64::from(*write))
                .build()?,
        ),
    })
}

/// Creates the table unless it exists, then waits until it and its index
/// are ACTIVE; says what it did.
pub async fn create(client: &Client, spec: &TableSpec) -> anyhow::Result<String> {
    if let Some(status) = status(client, &spec.name).await? {
        wait_active(client, spec).await?;
        return Ok(format!("table `{}` exists ({status}), used as it is", spec.name));
    }
    anyhow::ensure!(
        spec.create,
        "table `{}` does not exist and table.create is false: create it, or let faultline (create: true)",
        spec.name
    );
    let started = std::time::Instant::now();
    let mut attributes = vec![string_attribute(&spec.hash_key)?];
    let mut request = client
        .create_table()
        .table_name(&spec.name)
        .key_schema(key(&spec.hash_key, KeyType::Hash)?)
        .billing_mode(match spec.billing {
            BillingSpec::PayPerRequest => BillingMode::PayPerRequest,
            BillingSpec::Provisioned { .. } => BillingMode::Provisioned,
        })
        .set_provisioned_throughput(throughput(&spec.billing)?);
    if let Some(index) = &spec.index {
        attributes.push(string_attribute("gk")?);
        attributes.push(string_attribute("gr")?);
        let projection = SdkProjection::builder()
            .projection_type(match index.projection {
                Projection::All => ProjectionType::All,
                Projection::KeysOnly => ProjectionType::KeysOnly,
            })
            .build();
        request = request.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(&index.name)
                .key_schema(key("gk", KeyType::Hash)?)
                .key_schema(key("gr", KeyType::Range)?)
                .projection(projection)
                .set_provisioned_throughput(throughput(&spec.billing)?)
                .build()?,
        );
    }
    if spec.stream {
        request = request.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()?,
        );
    }
    request.set_attribute_definitions(Some(attributes)).send().await.map_err(|e| {
        anyhow::anyhow!("the server refused to create table `{}`: {}", spec.name, super::errors::explain(&e))
    })?;
    wait_active(client, spec).await?;
    let index = spec.index.as_ref().map(|i| format!(" with index `{}`", i.name)).unwrap_or_default();
    Ok(format!("created table `{}`{index}, ACTIVE after {:.1}s", spec.name, started.elapsed().as_secs_f64()))
}

/// The table's status, None when it does not exist.
async fn status(client: &Client, name: &str) -> anyhow::Result<Option<String>> {
    match client.describe_table().table_name(name).send().await {
        Ok(out) => Ok(Some(out.table().and_then(|t| t.table_status()).map_or("unknown".into(), |s| s.as_str().into()))),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => Ok(None),
        Err(e) => Err(anyhow::anyhow!("DescribeTable `{name}`: {}", super::errors::explain(&e))),
    }
}

async fn wait_active(client: &Client, spec: &TableSpec) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + spec.active_timeout.0;
    loop {
        let out = client
            .describe_table()
            .table_name(&spec.name)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("DescribeTable `{}`: {}", spec.name, super::errors::explain(&e)))?;
        let table = out.table().context("DescribeTable answered without the table")?;
        let active = table.table_status() == Some(&TableStatus::Active)
            && table.global_secondary_indexes().iter().all(|i| i.index_status() == Some(&IndexStatus::Active));
        if let Some(index) = &spec.index {
            let has = table.global_secondary_indexes().iter().any(|i| i.index_name() == Some(index.name.as_str()));
            anyhow::ensure!(
                has,
                "table `{}` has no index `{}`: the spec's table.index must match the table",
                spec.name,
                index.name
            );
        }
        if active {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "table `{}` was not ACTIVE (with its index) within {}",
            spec.name,
            faultline_model::units::format_duration(spec.active_timeout.0)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The ARN of the table's stream, which must carry old and new images
/// (the checker follows both).
pub async fn stream_arn(client: &Client, name: &str) -> anyhow::Result<String> {
    let out = client
        .describe_table()
        .table_name(name)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("DescribeTable `{name}`: {}", super::errors::explain(&e)))?;
    let table = out.table().context("DescribeTable answered without the table")?;
    let view = table.stream_specification().filter(|s| s.stream_enabled()).and_then(|s| s.stream_view_type());
    match (table.latest_stream_arn(), view) {
        (Some(arn), Some(StreamViewType::NewAndOldImages)) => Ok(arn.to_string()),
        (Some(_), Some(other)) => anyhow::bail!(
            "table `{name}`'s stream carries {other} only; the hot-key checker needs NEW_AND_OLD_IMAGES: recreate it, or set table.stream: false"
        ),
        _ => anyhow::bail!(
            "table `{name}` has no stream, but the spec's table.stream is true: enable one (NEW_AND_OLD_IMAGES), or set table.stream: false"
        ),
    }
}

/// Waits until a deleted table is gone, so it can be created again.
pub async fn wait_gone(client: &Client, name: &str, timeout: Duration) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    while status(client, name).await?.is_some() {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "table `{name}` was still there {} after DeleteTable",
            faultline_model::units::format_duration(timeout)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Deletes the table; says what it did.
pub async fn delete(client: &Client, name: &str) -> anyhow::Result<String> {
    match client.delete_table().table_name(name).send().await {
        Ok(_) => Ok(format!("deleted table `{name}`")),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => {
            Ok(format!("table `{name}` was already gone"))
        }
        Err(e) => Err(anyhow::anyhow!("DeleteTable `{name}`: {}", super::errors::explain(&e))),
    }
}
