//! A local HTTP server that answers as DynamoDB and DynamoDB Streams do
//! (the JSON protocol: an `X-Amz-Target` naming the call, a JSON body), from
//! a test's script, for the unit tests of what the driver does with answers
//! no server on this machine gives on demand: an index or a stream that
//! lags behind the table (moto updates both with the item). It is no
//! DynamoDB: every answer is what the script returns for the call.

use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What the script is given: the call's name (`Query`, `GetRecords`) and
/// its JSON body; it returns the body of a 200 answer.
pub type Script = dyn Fn(&str, &Value) -> Value + Send + Sync;

/// Serves `script` on a loopback port until the test's runtime ends;
/// returns the endpoint.
pub async fn serve(script: impl Fn(&str, &Value) -> Value + Send + Sync + 'static) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let script: Arc<Script> = Arc::new(script);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let script = Arc::clone(&script);
            tokio::spawn(async move {
                let _ = answer(socket, &*script).await;
            });
        }
    });
    endpoint
}

/// Reads one request (headers, then a body of its content-length) and
/// answers it, closing the connection.
async fn answer(mut socket: TcpStream, script: &Script) -> std::io::Result<()> {
    let mut received = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        received.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&received[..head_end]).into_owned();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_string())
        })
    };
    let length: usize = header("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    while received.len() < head_end + length {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        received.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&received[head_end..head_end + length]).unwrap_or(Value::Null);
    let target = header("x-amz-target").unwrap_or_default();
    let call = target.rsplit('.').next().unwrap_or_default();
    let reply = script(call, &body).to_string();
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reply.len()
    );
    socket.write_all(answer.as_bytes()).await
}
