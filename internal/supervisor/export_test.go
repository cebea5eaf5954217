package supervisor

// StartID is startID, for tests of the external package.
var StartID = startID
