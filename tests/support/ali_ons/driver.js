'use strict';
// Drives ali-ons (the pure-JavaScript RocketMQ client) for OrbitMQ's tests; events are JSON
// lines on stdout, as with the C++ and 5.x SDK drivers.
//
//   node driver.js produce  NAMESRV TOPIC COUNT [ACCESS_KEY SECRET_KEY]
//   node driver.js consume  NAMESRV TOPIC GROUP COUNT TIMEOUT_MS [ACCESS_KEY SECRET_KEY]
//
// produce sends COUNT messages (body "ali-<i>", tag TagA, key "ali-key-<i>") one at a time and
// prints {"event":"sent",...} or {"event":"send_failed",...} for each. consume subscribes GROUP
// to TOPIC from the first offset and prints {"event":"received",...} per message until COUNT
// distinct bodies arrived, or {"event":"timeout"} after TIMEOUT_MS.

const httpclient = require('urllib');
const { Producer, Consumer, Message } = require('ali-ons');

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

function credentials(accessKey, secretKey) {
  return accessKey ? { accessKeyId: accessKey, accessKeySecret: secretKey } : {};
}

// A client whose requests are refused (a wrong secret) cannot unregister either: that is
// reported as an event, not as the run's failure.
async function closeQuietly(client) {
  try {
    await client.close();
  } catch (err) {
    emit({ event: 'close_failed', message: err.message });
  }
}

async function produce(nameSrv, topic, count, accessKey, secretKey) {
  const producer = new Producer({
    httpclient, nameSrv, producerGroup: 'PG_ALI_ONS', ...credentials(accessKey, secretKey),
  });
  producer.on('error', err => emit({ event: 'error', message: err.message }));
  await producer.ready();
  for (let i = 0; i < count; i++) {
    const msg = new Message(topic, 'TagA', `ali-${i}`);
    msg.keys = [ `ali-key-${i}` ];
    try {
      const result = await producer.send(msg);
      emit({ event: 'sent', seq: i, status: result.sendStatus, msgId: result.msgId });
    } catch (err) {
      emit({ event: 'send_failed', seq: i, message: err.message });
    }
  }
  await closeQuietly(producer);
}

async function consume(nameSrv, topic, group, count, timeoutMs, accessKey, secretKey) {
  const consumer = new Consumer({
    httpclient, nameSrv, consumerGroup: group, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    ...credentials(accessKey, secretKey),
  });
  consumer.on('error', err => emit({ event: 'error', message: err.message }));
  const bodies = new Set();
  const done = new Promise(resolve => {
    consumer.subscribe(topic, '*', async msg => {
      const body = msg.body.toString();
      bodies.add(body);
      emit({ event: 'received', body, tags: msg.tags, keys: msg.keys, msgId: msg.msgId });
      if (bodies.size >= count) {
        resolve(true);
      }
    });
  });
  const timer = new Promise(resolve => setTimeout(() => resolve(false), timeoutMs));
  if (!await Promise.race([ done, timer ])) {
    emit({ event: 'timeout', received: bodies.size });
  }
  await closeQuietly(consumer);
}

async function main() {
  const [ command, nameSrv, topic, ...rest ] = process.argv.slice(2);
  if (command === 'produce') {
    const [ count, accessKey, secretKey ] = rest;
    await produce(nameSrv, topic, Number(count), accessKey, secretKey);
  } else if (command === 'consume') {
    const [ group, count, timeoutMs, accessKey, secretKey ] = rest;
    await consume(nameSrv, topic, group, Number(count), Number(timeoutMs), accessKey, secretKey);
  } else {
    throw new Error(`unknown command ${command}`);
  }
}

main().then(() => process.exit(0), err => {
  emit({ event: 'failed', message: err.message });
  process.exit(3);
});
