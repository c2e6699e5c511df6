# Third-party packages, all from Debian 12 (scripts/install-deps.sh installs them).
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(Boost 1.74 REQUIRED)               # Multiprecision and Math are header-only
find_package(GMP REQUIRED)
find_package(MPFR REQUIRED)
find_package(MPFI REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)
