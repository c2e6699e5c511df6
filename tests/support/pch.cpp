// The translation unit that builds the tests' shared precompiled header (tests/CMakeLists.txt); it
// links into an executable without tests so that its flags are those of the test executables.
