// A client in another language drives skyhop through README's "The workflow contract" alone: it
// starts a LaunchWorkflow, reads its LaunchResult, and follows the job through the cluster's
// `status` query. Prints one JSON line {"launch": LaunchResult, "job": JobRecord} and exits 0; a
// failed launch prints "launch failed: <type>: <message>" on stderr and exits 1.
//
//   node launch.mjs --address HOST:PORT --cluster NAME --run 'echo hi' [--accelerators H100:8] [--no-codec]
//
// The keyring comes from SKYHOP_KEY or SKYHOP_KEY_FILE (codec.mjs). --no-codec leaves payloads
// as plain JSON, as a client that ignores README's "Payload encryption" would send them.
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';

import { Client, Connection, WorkflowFailedError } from '@temporalio/client';

import { SkyhopCodec, loadKeyring } from './codec.mjs';

const WORKFLOW_QUEUE = 'skyhop-workflows';
const DONE = new Set(['SUCCEEDED', 'FAILED', 'FAILED_SETUP', 'CANCELLED']);
const JOB_DEADLINE_MS = 120_000;

const { values: args } = parseArgs({
  options: {
    address: { type: 'string' },
    namespace: { type: 'string', default: 'default' },
    cluster: { type: 'string' },
    run: { type: 'string' },
    accelerators: { type: 'string' },
    'no-codec': { type: 'boolean', default: false },
  },
});
if (!args.address || !args.cluster || !args.run) {
  console.error('usage: node launch.mjs --address HOST:PORT --cluster NAME --run COMMAND [--no-codec]');
  process.exit(2);
}

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The innermost cause of a Temporal failure: what the worker said. */
function innermost(/** @type {any} */ error) {
  while (error?.cause) error = error.cause;
  return error;
}

/** A query may be refused while new events arrive (README); ask again until the deadline. */
async function query(/** @type {import('@temporalio/client').WorkflowHandle} */ handle, /** @type {string} */ name) {
  for (;;) {
    try {
      return await handle.query(name);
    } catch (error) {
      if (!String(error?.message).includes('activation outside a workflow task')) throw error;
      await sleep(100);
    }
  }
}

async function main() {
  const connection = await Connection.connect({ address: args.address });
  const client = new Client({
    connection,
    namespace: args.namespace,
    dataConverter: args['no-codec'] ? {} : { payloadCodecs: [new SkyhopCodec(loadKeyring())] },
  });
  try {
    const request = {
      cluster_name: args.cluster,
      task: { run: args.run, resources: { infra: 'local', accelerators: args.accelerators } },
      user: 'ts-client',
    };
    const handle = await client.workflow.start('LaunchWorkflow', {
      taskQueue: WORKFLOW_QUEUE,
      workflowId: `launch:${args.cluster}:${randomBytes(4).toString('hex')}`,
      args: [request],
    });
    let launch;
    try {
      launch = await handle.result();
    } catch (error) {
      if (!(error instanceof WorkflowFailedError)) throw error;
      const cause = innermost(error);
      console.error(`launch failed: ${cause.type ?? cause.name}: ${cause.message}`);
      return 1;
    }
    const cluster = client.workflow.getHandle(`cluster:${args.cluster}`);
    const deadline = Date.now() + JOB_DEADLINE_MS;
    for (;;) {
      const record = await query(cluster, 'status');
      const job = record.jobs.find((/** @type {any} */ j) => j.job_id === launch.job_id);
      if (job && DONE.has(job.status)) {
        console.log(JSON.stringify({ launch, job }));
        return 0;
      }
      if (Date.now() > deadline) throw new Error(`job ${launch.job_id} did not end within ${JOB_DEADLINE_MS} ms`);
      await sleep(200);
    }
  } finally {
    await connection.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`error: ${error?.message ?? error}`);
    process.exit(2);
  },
);
