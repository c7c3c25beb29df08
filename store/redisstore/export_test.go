package redisstore

// ScriptKinds names the store's scripts by their SHA-1, so that a test
// counting what a fleet's clients send can tell them apart.
var ScriptKinds = map[string]string{
	failureScript.Hash(): "failure",
	windowScript.Hash():  "window",
	openScript.Hash():    "open",
	probeScript.Hash():   "lease",
	resolveScript.Hash(): "verdict",
	resetScript.Hash():   "reset",
	forceScript.Hash():   "force",
	successScript.Hash(): "success",
	inspectScript.Hash(): "inspect",
}
