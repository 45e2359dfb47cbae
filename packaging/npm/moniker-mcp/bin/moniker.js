#!/usr/bin/env node
// `moniker` and `moniker-mcp` from npm: runs the native binary of the platform package that npm
// installed beside this one (moniker-mcp-<platform>-<arch>, an optional dependency), with this
// process's stdin, stdout and stderr, forwarding SIGINT, SIGTERM and SIGHUP to it, and ends the
// way it ended: with its exit code, or killed by the same signal.
"use strict";

const { spawn } = require("child_process");
const os = require("os");
const path = require("path");

const SUPPORTED = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"];
const platform = `${process.platform}-${process.arch}`;
const packageName = `moniker-mcp-${platform}`;
const exe = process.platform === "win32" ? "moniker.exe" : "moniker";

function fail(message) {
  process.stderr.write(`moniker-mcp: ${message}\n`);
  process.exit(1);
}

function version() {
  try {
    return require("../package.json").version;
  } catch {
    return "latest";
  }
}

function binaryPath() {
  if (!SUPPORTED.includes(platform)) {
    fail(
      `there is no prebuilt moniker for ${process.platform} ${process.arch} ` +
        `(there is for ${SUPPORTED.join(", ")}); build it from source: cargo install moniker-mcp`,
    );
  }
  let manifest;
  try {
    manifest = require.resolve(`${packageName}/package.json`);
  } catch {
    fail(
      `the package with moniker's binary for this platform, ${packageName}, is not installed.\n` +
        `npm installs it as an optional dependency of moniker-mcp; it is left out by --omit=optional ` +
        `(--no-optional), or by a lockfile made on another platform.\n` +
        `Install it: npm install ${packageName}@${version()}`,
    );
  }
  return path.join(path.dirname(manifest), "bin", exe);
}

// Search's model, when the package moniker-mcp-model is installed beside this one: its folder,
// in $MONIKER_MODEL unless that names one already (moniker runs it when the config searches).
function modelEnv() {
  if (process.env.MONIKER_MODEL) return process.env;
  try {
    const manifest = require.resolve("moniker-mcp-model/package.json");
    return { ...process.env, MONIKER_MODEL: path.dirname(manifest) };
  } catch {
    return process.env;
  }
}

const binary = binaryPath();
const child = spawn(binary, process.argv.slice(2), {
  stdio: "inherit",
  windowsHide: true,
  env: modelEnv(),
});

const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
const forward = (signal) => {
  if (child.exitCode === null && child.signalCode === null) {
    try {
      child.kill(signal);
    } catch {
      // It has just exited: its `exit` event follows.
    }
  }
};
for (const signal of forwarded) process.on(signal, forward);

child.on("error", (error) => {
  fail(`cannot run ${binary}: ${error.message}`);
});

child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, as a shell or a client expects of the process it started.
    for (const s of forwarded) process.removeListener(s, forward);
    process.kill(process.pid, signal);
    // A signal whose default action does not end the process (or Windows): 128 + its number.
    setTimeout(() => process.exit(128 + (os.constants.signals[signal] || 0)), 1000);
    return;
  }
  process.exit(code === null ? 1 : code);
});
